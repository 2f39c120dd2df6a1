"""The only rq messages a worker runs: this service's own task, named by `TASK`.

An rq message names the function to run as a dotted path, and rq imports whatever it names (and
its success, failure and stopped callbacks; it also posts to any webhook URLs the message
lists). Anyone who can write to the queue's Redis could then run `os.system` in the worker. So
the worker reads messages as `ServiceJob`: a message naming any other function, a callback, a
webhook or a bound instance fails unrun and is logged, and nothing it names is imported.
"""

from __future__ import annotations

import logging
from types import FrameType
from typing import Any

import redis
from rq import Queue, SimpleWorker
from rq.job import Job
from rq.serializers import JSONSerializer

from app.jobs.redis_queue import TASK

log = logging.getLogger("app.worker")

# Every function path the service itself puts on its queue (app/jobs/redis_queue.py sends).
TASKS = frozenset({TASK})


class RefusedMessage(Exception):
    """An rq message that asks for something other than one of the service's tasks."""


def refusal(job: Job) -> str | None:
    """Why the worker must not run this message, or None when it is one the service sends."""
    if job.func_name not in TASKS:
        return f"names {job.func_name!r}, which is not a task of this service"
    if job.instance is not None:
        return "binds its task to an instance"
    callbacks = (
        job._success_callback_name,
        job._failure_callback_name,
        job._stopped_callback_name,
    )
    if any(callbacks):
        return "names callbacks"
    if job.webhooks:
        return "lists webhooks"
    return None


class ServiceJob(Job):
    """A message whose function, callbacks and webhooks are checked before anything is used."""

    @property
    def func(self) -> Any:
        """The task to run; RefusedMessage (the message fails) for anything else."""
        reason = refusal(self)
        if reason is not None:
            log.warning("refused rq message %s: it %s", self.id, reason)
            raise RefusedMessage(f"refused: the message {reason}")
        return super().func

    # The service's messages carry no callbacks (a message that does is refused above); these
    # never import a name, even on the failure path that the refusal itself takes.
    @property
    def success_callback(self) -> None:
        """Never a callback."""
        return None

    @property
    def failure_callback(self) -> None:
        """Never a callback."""
        return None

    @property
    def stopped_callback(self) -> None:
        """Never a callback."""
        return None

    def send_webhooks(self, status: Any, *, exc_string: str | None = None) -> None:
        """Never posts anywhere: the service's messages list no webhooks."""


class ServiceWorker(SimpleWorker):
    """rq's in-process worker, remembering whether a signal (SIGTERM, SIGINT) asked it to stop:
    rq itself records that only for a busy worker (an idle one leaves its loop at once)."""

    stop_requested = False

    def request_stop(self, signum: int, frame: FrameType | None) -> None:
        """rq's handler of a first SIGTERM or SIGINT (finish the current message, then stop)."""
        self.stop_requested = True
        super().request_stop(signum, frame)  # type: ignore[no-untyped-call]


def rq_worker(queue: Queue, connection: redis.Redis[bytes], name: str) -> ServiceWorker:
    """The worker `python -m app.worker` runs: in-process, JSON messages, checked tasks only."""
    return ServiceWorker(
        [queue],
        connection=connection,
        name=name,
        serializer=JSONSerializer,
        job_class=ServiceJob,
    )
