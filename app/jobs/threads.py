"""The `threads` job backend: a bounded pool of threads in the API process.

Each free thread claims a batch of the fairest tenant's queued jobs (`JobStore.claim_batch`:
tenants with fewer running jobs, then the one served least recently), so one tenant's burst
cannot starve another, and runs it (with the `run_batch` it was given:
`app.job_runners.runner.run_jobs` on the container's collaborators). An idle thread woken by an
upload claims at once: a lone upload never waits for a batch that may not come.
Batches form on their own from the jobs that arrive while the threads are busy: a thread that
has just run a batch claims everything of one tenant that arrived meanwhile (up to
RAG_INGEST_BATCH_JOBS and RAG_INGEST_BATCH_BYTES). Jobs a crash left `processing` are re-queued
at start-up; stable chunk ids make the retry an upsert. Evaluation runs are left to the
evaluation runner's own thread (app/job_runners/evaluation.py), so a run never holds a thread
that uploads need.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from app import metrics
from app.config import Settings
from app.jobs.store import JobRecord, JobStore

log = logging.getLogger(__name__)


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
        # Uploads so far; idle threads wait on `_arrival` for the count to move.
        self._arrival = threading.Condition()
        self._arrivals = 0
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
        (one per upload: the others need not race it for the claim)."""
        with self._arrival:
            self._arrivals += 1
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
        while not self._stop.is_set():
            seen = self._arrivals  # what was queued before this claim, it takes (up to a batch)
            try:
                # A read first: a claim is a write (SQLite's one write lock, which the uploads
                # need too), and after a batch there is often nothing left to claim.
                batch = (
                    self._jobs.claim_batch(
                        settings.max_running_jobs_per_tenant,
                        max_jobs=settings.ingest_batch_jobs,
                        max_bytes=settings.ingest_batch_bytes,
                        scope="jobs",  # evaluation runs have their own thread
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
                # Idle until an upload arrives (or the poll interval passes), then claim at once.
                self._idle(seen)
                continue
            self._run_batch(batch)

    def _idle(self, seen: int) -> None:
        """Wait until an upload has arrived since `seen` arrivals, the pool stops, or the poll
        interval has passed."""
        with self._arrival:
            self._arrival.wait_for(
                lambda: self._arrivals != seen or self._stop.is_set(), self._poll
            )
