"""The `threads` job backend: a bounded pool of threads in the API process.

Each free thread claims a batch of the fairest tenant's queued jobs (`JobStore.claim_batch`:
tenants with fewer running jobs, then the one served least recently), so one tenant's burst
cannot starve another, and runs it (with the `run_batch` it was given:
`app.job_runners.runner.run_jobs` on the container's collaborators). An idle thread woken by an
upload claims at once: a lone upload never waits for a batch that may not come.
Batches form on their own from the jobs that arrive while the threads are busy: a thread that
has just run a batch claims everything of one tenant that arrived meanwhile (up to
RAG_INGEST_BATCH_JOBS and RAG_INGEST_BATCH_BYTES). While a batch of a tenant is young (under
`JOIN_AFTER_S`), the other threads leave to it fewer of that tenant's new jobs than it holds, and
serve other tenants; as soon as as many have come as it holds, a free thread takes them as a
batch of its own. So a few clients each uploading a file and waiting for it form batches as big
as each other instead of each thread taking one file at a time (every batch pays one vector
write, one claim and one record of its own), and the next batch is parsed and waiting for the
embedder while the running one embeds and is stored, instead of starting once it has ended
(with four such clients the embedder stood idle over 40% of the time, waiting for each store). A
burst (a folder synced file by file) is shared the same way; and a job queued behind a long batch
(a big scan) is taken by a free thread once that batch has run `JOIN_AFTER_S`. Jobs a crash left
`processing` are re-queued at start-up; stable chunk ids make the retry an upsert.
Evaluation runs are left to the evaluation runner's own thread (app/job_runners/evaluation.py),
so a run never holds a thread that uploads need.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from app import metrics
from app.config import Settings
from app.jobs.store import JobRecord, JobStore

log = logging.getLogger(__name__)

# How long another thread leaves a tenant's new jobs to that tenant's running batch. Longer than
# a batch of small files takes (tens of milliseconds), short beside a big file's indexing.
JOIN_AFTER_S = 0.25


@dataclass(frozen=True)
class _Batch:
    """A batch one thread of the pool is running."""

    tenant_id: str
    jobs: int
    started: float  # time.monotonic()


class IngestWorkerPool:
    """RAG_WORKER_POOL_SIZE daemon threads taking queued jobs until stopped."""

    def __init__(
        self,
        jobs: JobStore,
        run_batch: Callable[[list[JobRecord]], object],
        settings: Settings,
        poll_interval_s: float = 1.0,
    ) -> None:
        self._jobs = jobs
        self._run_batch = run_batch
        self._settings = settings
        self._size = settings.worker_pool_size
        self._poll = poll_interval_s
        # Uploads so far, and those of them left to a young batch of their tenant; idle threads
        # wait on `_arrival` for an upload that is not left to one.
        self._arrival = threading.Condition()
        self._arrivals = 0
        self._left_to_batch = 0
        self._running: dict[str, _Batch] = {}  # by the name of the thread running it
        # tenant -> uploads left to its young batches since the latest of them started
        self._left: Counter[str] = Counter()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> int:
        """Re-queue jobs a crash left processing, then start the threads; returns re-queued."""
        requeued = self._jobs.requeue_stale()
        if requeued:
            log.warning("re-queued interrupted jobs", extra={"count": requeued})
        for i in range(self._size):
            thread = threading.Thread(target=self._loop, name=f"ingest-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return requeued

    def enqueue(self, job: JobRecord) -> None:
        """Hand over a newly queued job: the threads poll the table, so just wake one of them
        (one per upload: the others need not race it for the claim). A job of a tenant whose
        young batches hold more jobs than have been left to them is left to them too; an idle
        thread looks again once those batches are no longer young. The newcomer that makes as
        many as they hold wakes an idle thread, which takes them all as a batch of its own."""
        with self._arrival:
            self._arrivals += 1
            tenant = job.tenant_id
            holds = self._young_holds()[0][tenant]
            if holds:
                self._left[tenant] += 1
                if self._left[tenant] < holds:  # fewer than its young batches hold
                    self._left_to_batch += 1
                    # No idle thread would take it: they already wake when the batch turns old.
                    return
            self._arrival.notify()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the threads to finish their current job and exit."""
        self._stop.set()
        with self._arrival:
            self._arrival.notify_all()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads.clear()

    def _loop(self) -> None:
        settings = self._settings
        me = threading.current_thread().name
        while not self._stop.is_set():
            with self._arrival:  # what was queued before this claim, it takes (up to a batch)
                seen = (self._arrivals, self._left_to_batch)
                young, _ = self._young_batches()
            try:
                # A read first: a claim is a write (SQLite's one write lock, which the uploads
                # need too), and after a batch there is often nothing left to claim.
                batch = (
                    self._jobs.claim_batch(
                        settings.max_running_jobs_per_tenant,
                        max_jobs=settings.ingest_batch_jobs,
                        max_bytes=settings.ingest_batch_bytes,
                        scope="jobs",  # evaluation runs have their own thread
                        skip_tenants=young,
                    )
                    if self._jobs.has_claimable("jobs")
                    else []
                )
            except Exception:
                log.exception("could not claim a job")
                batch = []
            else:
                metrics.worker_heartbeat(time.time())  # reached the job table
            if not batch:
                self._idle(seen, young)  # then claim at once
                continue
            with self._arrival:
                tenant = batch[0].tenant_id
                self._running[me] = _Batch(tenant, len(batch), time.monotonic())
                self._left.pop(tenant, None)  # those left to its batches so far are in this one
                self._arrival.notify_all()  # idle threads time their next look by it
            try:
                self._run_batch(batch)
            finally:
                with self._arrival:
                    del self._running[me]

    def _young_holds(self) -> tuple[Counter[str], list[_Batch]]:
        """How many jobs each tenant's young batches (running for less than JOIN_AFTER_S)
        hold, and those batches. Called holding `_arrival`."""
        now = time.monotonic()
        young = [b for b in self._running.values() if now - b.started < JOIN_AFTER_S]
        holds = Counter[str]()
        for batch in young:
            holds[batch.tenant_id] += batch.jobs
        return holds, young

    def _young_batches(self) -> tuple[frozenset[str], float | None]:
        """The tenants whose new jobs are left to their young batches (left fewer newcomers than
        those batches hold), and the seconds until the first of those batches turns old
        (None: no such batch). Called holding `_arrival`."""
        holds, young = self._young_holds()
        tenants = frozenset(t for t, jobs in holds.items() if self._left[t] < jobs)
        if not tenants:
            return frozenset(), None
        oldest = min(b.started for b in young if b.tenant_id in tenants)
        return tenants, JOIN_AFTER_S - (time.monotonic() - oldest)

    def _idle(self, seen: tuple[int, int], skipped: frozenset[str]) -> None:
        """Wait, from `seen` (arrivals, of them left to a young batch), until an upload arrives
        that is not left to a young batch, uploads were left to batches that are no longer
        young, a tenant the last claim `skipped` (its batch was young) is no longer left to its
        batches, the pool stops, or the poll interval passes."""
        arrivals, left = seen
        deadline = time.monotonic() + self._poll
        with self._arrival:
            while not self._stop.is_set():
                held = self._left_to_batch - left
                if self._arrivals - arrivals > held:
                    return  # an upload no batch will take
                young, next_look = self._young_batches()
                if held and next_look is None:
                    return  # left to batches that have ended or run long: look again
                if skipped - young:
                    return  # the claim passed over jobs no batch holds for any more
                wait = deadline - time.monotonic()
                if wait <= 0:
                    return
                self._arrival.wait(wait if next_look is None else min(wait, next_look))
