"""The `redis` job backend, worker side: what one `python -m app.worker` process does.

A message is a turn: the worker claims its own job if that is a due retry, else a batch of the
fairest tenant's queued jobs, and runs it with a heartbeat. Beside the rq loop, a sweeper keeps
the queue honest against the job table:
- a running job's heartbeat (`updated_at`) is refreshed every RAG_JOB_HEARTBEAT_S;
- jobs `processing` without a heartbeat for RAG_JOB_STALE_AFTER_S (their worker died) go back to
  `queued`, or fail after RAG_JOB_MAX_ATTEMPTS tries;
- jobs `queued` with no pending message (worker death, Redis outage at upload), or whose retry
  is overdue (the worker running rq's scheduler died), are sent again.
A retried job re-indexes from its upload; stable chunk ids make that an upsert, not a duplicate.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from types import TracebackType

import redis

from app import metrics
from app.config import Settings
from app.job_runners.runner import IngestDeps, run_jobs
from app.jobs.redis_queue import message_pending, retry_delay_s, rq_queue, send
from app.jobs.store import JobRecord, JobStore

log = logging.getLogger("app.worker")
# How often a turn that found every waiting tenant at its running limit looks again.
TURN_POLL_S = 0.5


@dataclass(frozen=True)
class Swept:
    """What a sweep did: jobs re-queued (their worker stopped heart-beating), and queued jobs
    whose lost message was sent again."""

    requeued: int
    resent: int


class Heartbeat:
    """While open, touches processing jobs every `interval_s` from a background thread."""

    def __init__(self, jobs: JobStore, job_ids: str | list[str], interval_s: float) -> None:
        self._jobs = jobs
        self._job_ids = [job_ids] if isinstance(job_ids, str) else list(job_ids)
        self._interval_s = interval_s
        self._stop = threading.Event()
        name = f"heartbeat-{self._job_ids[0]}"
        self._thread = threading.Thread(target=self._beat, name=name, daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while self._job_ids and not self._stop.wait(self._interval_s):
            for job_id in list(self._job_ids):
                try:
                    if not self._jobs.heartbeat(job_id):
                        # Ended (a batch's jobs end one by one) or no longer ours.
                        self._job_ids.remove(job_id)
                except Exception:
                    log.exception("heartbeat of job %s failed", job_id)


class IngestWorker:
    """Runs the messages of one worker process and sweeps the job table."""

    def __init__(self, settings: Settings, ingest: IngestDeps, client: redis.Redis[bytes]) -> None:
        self.settings = settings
        self.queue = rq_queue(settings, client)
        self.ingest = replace(ingest, on_paused=self._send_resumed)

    def _send_resumed(self, job: JobRecord) -> None:
        """A job put back after a turn of OCR needs a message to be claimed again; if Redis is
        down, the sweep sends one."""
        try:
            send(self.queue, job.job_id, job.attempts, self.settings.job_timeout_s, resumed=True)
        except redis.RedisError:
            log.warning("could not send the resumed job %s; the sweep sends it", job.job_id)

    def process(self, job_id: str) -> str:
        """Run one job for a message: its own job if that is a due retry, else the fairest.

        A message is a turn, not an order: each queued job has one message, so every turn finds
        a job, but which job runs is chosen fairly across tenants (`JobStore.claim_next`). A job
        whose own message was spent on another job is re-sent by the sweep; a turn that finds
        nothing queued does nothing; one that finds only tenants at their running limit waits.
        Evaluation runs that answer are left to the API process (its answer admission).
        """
        settings = self.settings
        jobs = self.ingest.jobs
        retry = jobs.claim_retry(job_id)
        batch = [retry] if retry is not None else self._claim_batch()
        # Jobs wait, but every waiting tenant is at its running limit: keep this turn until one
        # of theirs ends (or another tenant's job arrives) rather than drop it, so messages and
        # queued jobs stay one to one and the sweep has nothing to re-send.
        while not batch and jobs.has_claimable("worker"):
            time.sleep(TURN_POLL_S)
            batch = self._claim_batch()
        if not batch:
            return "skipped: nothing queued (done or taken by another worker)"
        # A job put back after a transient failure is retried alone, by its own delayed message.
        with Heartbeat(jobs, [job.job_id for job in batch], settings.job_heartbeat_s):
            retried = set(run_jobs(self.ingest, batch, max_attempts=settings.job_max_attempts))
        outcomes = []
        for job in batch:
            if job.job_id not in retried:
                outcomes.append(f"finished {job.job_id}")
                continue
            delay = retry_delay_s(settings.job_retry_base_s, job.attempts)
            outcomes.append(f"transient failure of {job.job_id}; retry in {delay:.0f} s")
            try:
                send(self.queue, job.job_id, job.attempts, settings.job_timeout_s, delay_s=delay)
            except redis.RedisError:
                log.warning("could not schedule the retry of %s; the sweep sends it", job.job_id)
        return "; ".join(outcomes)

    def _claim_batch(self) -> list[JobRecord]:
        settings = self.settings
        return self.ingest.jobs.claim_batch(
            settings.max_running_jobs_per_tenant,
            max_jobs=settings.ingest_batch_jobs,
            max_bytes=settings.ingest_batch_bytes,
            scope="worker",
        )

    def sweep(self, now: datetime | None = None) -> Swept:
        """Re-queue abandoned jobs, re-send queued ones without a message; returns both counts.
        Ages are measured at `now` (default: the current time)."""
        settings = self.settings
        jobs = self.ingest.jobs
        requeued = jobs.requeue_stale(settings.job_stale_after_s, settings.job_max_attempts, now)
        if requeued:
            log.warning("re-queued %d jobs whose worker stopped heart-beating", requeued)
        resent = 0
        # The grace period covers an API process between creating the row and sending its
        # message, and the scheduler between a retry's time and its delivery.
        grace = 2 * settings.job_heartbeat_s
        for job_id, attempts in jobs.queued_since(grace, now=now, scope="worker"):
            if not message_pending(self.queue, job_id, attempts, overdue_after_s=grace, now=now):
                send(self.queue, job_id, attempts, settings.job_timeout_s)
                resent += 1
        if resent:
            log.warning("re-sent %d queued jobs that had no pending message", resent)
        return Swept(requeued, resent)

    def run_sweeper(self, stop: threading.Event, health_file: Path | None = None) -> None:
        """Sweep every heartbeat interval until `stop` is set; errors are logged and retried.

        After each successful sweep `health_file` is touched: a container health check reads
        its age to tell a live worker (database and Redis reachable) from a hung one.
        """
        while not stop.wait(self.settings.job_heartbeat_s):
            try:
                self.sweep()
            except Exception:
                log.exception("job sweep failed; will try again")
                continue
            metrics.worker_heartbeat(time.time())
            if health_file is not None:
                health_file.touch()
