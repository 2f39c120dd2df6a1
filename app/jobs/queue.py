"""How an accepted upload reaches a worker: the one way to enqueue, whatever the backend.

RAG_JOB_BACKEND chooses the backend:
- `threads` (default): the in-process pool (app/jobs/threads.py) polls the job table; one API
  process.
- `redis`: job ids go to Redis (app/jobs/redis_queue.py) for `python -m app.worker` processes
  (app/job_runners/redis_worker.py).

The queue is a component of the `Container` (`container.job_queue`), started and stopped with
the API process; `enqueue` hands it the jobs an upload created. This module knows nothing of
how a job is run: the threads backend is handed the function that runs a batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from app.jobs.store import JobRecord, JobStore

if TYPE_CHECKING:
    from app.config import Settings
    from app.jobs.ending_bell import RedisEndingBell


class JobQueue(Protocol):
    """Where the API hands a queued job; started and stopped with the API process."""

    def start(self) -> object:
        """Begin delivering jobs (threads: start the pool)."""
        ...

    def enqueue(self, job: JobRecord) -> None:
        """Hand over a job just created in the job table; never fails the upload."""
        ...

    def stop(self) -> None:
        """Stop delivering jobs (threads: let running jobs finish)."""
        ...


def enqueue(queue: JobQueue, jobs: Iterable[JobRecord]) -> None:
    """Hand newly queued jobs to the deployment's workers; never fails the upload."""
    for job in jobs:
        queue.enqueue(job)


def build_job_queue(
    settings: Settings,
    jobs: JobStore,
    run_batch: Callable[[list[JobRecord]], object],
    ending_bell: RedisEndingBell | None = None,
) -> JobQueue:
    """The queue chosen by RAG_JOB_BACKEND for an API process; `run_batch` runs claimed jobs
    (threads backend only: with Redis, worker processes run them, and the process hears of their
    ends through `ending_bell`)."""
    if settings.job_backend == "redis":
        from app.jobs.redis_queue import RedisJobQueue, rq_queue
        from app.storage.redis_client import connect_redis

        client = connect_redis(settings.redis_url)
        return RedisJobQueue(rq_queue(settings, client), settings.job_timeout_s, jobs, ending_bell)
    from app.jobs.threads import IngestWorkerPool

    return IngestWorkerPool(jobs, run_batch, settings)
