"""Where an upload's trace waits for the job that indexes it: the W3C `traceparent` of the
request that queued the job, read back by whichever thread or worker process runs it.

Workers claim jobs from the job table, not from the message that woke them, so the carrier is
kept by job id: in memory for the threads backend, in Redis (for a day) for worker processes.
Nothing is kept while tracing is off (the carrier is then empty).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Protocol

import redis

from app import tracing
from app.jobs.queue import JobQueue
from app.jobs.store import JobRecord

CARRIER_TTL_S = 24 * 3600
_MEMORY_LIMIT = 10_000  # carriers of jobs nobody ran (deleted first) must not pile up


class TraceCarriers(Protocol):
    """Keeps each queued job's trace carrier until the job runs."""

    def remember(self, job_id: str, carrier: Mapping[str, str]) -> None:
        """Keep the carrier of a job just queued (nothing when it is empty)."""

    def recall(self, job_id: str) -> dict[str, str]:
        """The job's carrier, forgotten once read; empty when there is none."""


class MemoryCarriers:
    """Carriers of jobs run by this process's own threads."""

    def __init__(self) -> None:
        self._carriers: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, job_id: str, carrier: Mapping[str, str]) -> None:
        """Keep the carrier of a job just queued (nothing when it is empty)."""
        if not carrier:
            return
        with self._lock:
            self._carriers[job_id] = dict(carrier)
            while len(self._carriers) > _MEMORY_LIMIT:
                self._carriers.popitem(last=False)

    def recall(self, job_id: str) -> dict[str, str]:
        """The job's carrier, forgotten once read; empty when there is none."""
        with self._lock:
            return self._carriers.pop(job_id, {})


class RedisCarriers:
    """Carriers of jobs run by worker processes, under `<queue>:trace:<job id>`."""

    def __init__(self, client: redis.Redis[bytes], queue_name: str) -> None:
        self._client = client
        self._prefix = f"{queue_name}:trace:"

    def remember(self, job_id: str, carrier: Mapping[str, str]) -> None:
        """Keep the carrier of a job just queued (nothing when it is empty)."""
        if carrier:
            self._client.set(self._prefix + job_id, json.dumps(dict(carrier)), ex=CARRIER_TTL_S)

    def recall(self, job_id: str) -> dict[str, str]:
        """The job's carrier, forgotten once read; empty when there is none or Redis is away
        (a trace is never worth failing a job)."""
        try:
            stored = self._client.getdel(self._prefix + job_id)
        except redis.RedisError:
            return {}
        if not stored:
            return {}
        loaded = json.loads(stored)
        return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


class TracedQueue:
    """A job queue that also keeps each job's trace carrier (used only while tracing is on)."""

    def __init__(self, queue: JobQueue, carriers: TraceCarriers) -> None:
        self._queue = queue
        self._carriers = carriers

    def start(self) -> object:
        """Begin delivering jobs."""
        return self._queue.start()

    def enqueue(self, job: JobRecord) -> None:
        """Keep the current trace for the job, then hand the job over."""
        with contextlib.suppress(redis.RedisError):  # the job matters, its trace does not
            self._carriers.remember(job.job_id, tracing.carrier())
        self._queue.enqueue(job)

    def stop(self) -> None:
        """Stop delivering jobs."""
        self._queue.stop()
