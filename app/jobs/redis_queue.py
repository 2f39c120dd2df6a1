"""The `redis` job backend, API side: job ids go onto an rq queue for worker processes.

The API runs no job itself; separate `python -m app.worker` processes take the ids (see
app/job_runners/redis_worker.py). The SQL job table stays the truth, so `GET /jobs/{id}` works from
any API process. A message carries only the job id and the attempt it is for, serialised as JSON
(never pickle: a message is data, not code). A message is a turn: the worker claims the fairest
tenant's queued jobs (or the message's own job when it is a due retry), so a duplicate or late
message is a no-op. Because of that, losing a message (Redis down during an upload, a worker
killed mid-job) is repaired by re-sending: every worker sweeps the table and re-sends jobs that
are queued without a pending message.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import redis

from app.jobs.store import JobRecord, JobStore

if TYPE_CHECKING:
    from rq import Queue

    from app.config import Settings
    from app.jobs.ending_bell import RedisEndingBell

log = logging.getLogger(__name__)

# The rq task a worker runs for a message; imported by name in the worker process.
TASK = "app.worker.process_job"
# rq keeps finished messages briefly (their state lives in SQL) and failed ones a week for
# inspection with `rq info`.
RESULT_TTL_S = 3600
FAILURE_TTL_S = 7 * 24 * 3600
# rq's own limit on a message is a backstop: the runner stops a job at RAG_JOB_TIMEOUT_S itself
# and records why; this leaves it the time to.
TIMEOUT_BACKSTOP_S = 60


def queue_name(settings: Settings) -> str:
    """The rq queue of this deployment; the key prefix keeps deployments sharing a Redis apart."""
    return f"{settings.redis_key_prefix}-ingest"


def message_id(job_id: str, attempts: int) -> str:
    """The rq id of the message for a job's next attempt (one message per attempt)."""
    return f"{job_id}-a{attempts}"


def retry_delay_s(base_s: float, attempt: int) -> float:
    """Backoff before retrying after the `attempt`-th try failed transiently (x4 per try)."""
    return base_s * float(4 ** max(attempt - 1, 0))


def send(
    queue: Queue,
    job_id: str,
    attempts: int,
    timeout_s: int,
    delay_s: float = 0.0,
    *,
    resumed: bool = False,
) -> None:
    """Put the message for a job's next attempt on the queue, now or after `delay_s`; a
    `resumed` job (put back after a turn) gets a message of its own, whatever its attempt's
    message is doing (a spare message is a turn that finds nothing: a no-op)."""
    name = message_id(job_id, attempts)
    options: dict[str, object] = {
        "job_id": f"{name}-resumed-{uuid.uuid4().hex[:12]}" if resumed else name,
        "job_timeout": timeout_s + TIMEOUT_BACKSTOP_S,
        "result_ttl": RESULT_TTL_S,
        "failure_ttl": FAILURE_TTL_S,
        "description": f"ingest {job_id} attempt {attempts + 1}",
    }
    if delay_s > 0:
        queue.enqueue_in(timedelta(seconds=delay_s), TASK, job_id, **options)
    else:
        queue.enqueue(TASK, job_id, **options)


def message_pending(
    queue: Queue,
    job_id: str,
    attempts: int,
    *,
    overdue_after_s: float | None = None,
    now: datetime | None = None,
) -> bool:
    """Whether the message for this attempt is still waiting for or held by a worker.

    With `overdue_after_s`, a delayed message (a retry) still waiting that long after its time
    at `now` (default: the current time) is not pending: rq delivers delayed messages through
    the scheduler of one worker, and when that worker dies the others take over its scheduler
    only at their next maintenance, up to 10 minutes later. Such a message is deleted, so the
    caller can send it again at once.
    """
    from rq.exceptions import NoSuchJobError
    from rq.job import Job, JobStatus
    from rq.registry import ScheduledJobRegistry
    from rq.serializers import JSONSerializer

    try:
        message = Job.fetch(
            message_id(job_id, attempts), connection=queue.connection, serializer=JSONSerializer
        )
    except NoSuchJobError:
        return False
    status = message.get_status(refresh=False)
    if status == JobStatus.SCHEDULED and overdue_after_s is not None:
        try:
            registry = ScheduledJobRegistry(queue=queue)  # type: ignore[no-untyped-call]
            due = registry.get_scheduled_time(message)
        except NoSuchJobError:  # delivered meanwhile
            return True
        if (now or datetime.now(UTC)) - due > timedelta(seconds=overdue_after_s):
            message.delete()  # nobody delivered it: make room to send it again
            return False
    waiting = (JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.DEFERRED, JobStatus.STARTED)
    if status in waiting:
        return True
    message.delete()  # consumed without running the job: make room to send it again
    return False


def rq_queue(settings: Settings, client: redis.Redis[bytes]) -> Queue:
    """The deployment's ingestion queue on a given Redis client; messages are JSON."""
    from rq import Queue
    from rq.serializers import JSONSerializer

    return Queue(queue_name(settings), connection=client, serializer=JSONSerializer)


@dataclass
class RedisJobQueue:
    """The API side of the Redis backend: sends job ids to worker processes, runs none itself.

    It never re-queues jobs at start-up: with several API processes and live workers, only a
    worker's sweep (which respects heartbeats) may decide a job was abandoned. Given an
    `ending_bell`, it listens from its start for the jobs the workers end, and rings the waiters
    of `jobs` (this process's job store).
    """

    queue: Queue
    timeout_s: int
    jobs: JobStore | None = None
    ending_bell: RedisEndingBell | None = None

    @property
    def name(self) -> str:
        """The rq queue the jobs go to."""
        return str(self.queue.name)

    def start(self) -> None:
        """Listen for the workers' job ends (for this process's waiting clients); the workers
        run elsewhere."""
        log.info("ingestion jobs go to Redis queue %s", self.queue.name)
        if self.ending_bell is not None and self.jobs is not None:
            self.ending_bell.listen(self.jobs.endings.heard)

    def enqueue(self, job: JobRecord) -> None:
        """Send the job id; if Redis is down the job stays queued and a worker's sweep sends it."""
        try:
            send(self.queue, job.job_id, job.attempts, self.timeout_s)
        except redis.RedisError as exc:
            log.warning(
                "could not send job %s to Redis (%s); it stays queued and will be re-sent",
                job.job_id,
                exc,
            )

    def stop(self) -> None:
        """Stop listening and close the Redis connections of this process."""
        if self.ending_bell is not None:
            self.ending_bell.stop()
        self.queue.connection.close()
