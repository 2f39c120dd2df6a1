"""Who is told, in this process, the moment a job ends (done or failed).

The job table is the truth; this is only a doorbell. A client waiting on `GET /jobs/{id}?wait=`
registers a callback for its job, and the `JobStore` that records the job's end rings it after
the commit, with the job as that commit left it (the waiter answers with it, reading nothing).
A job ended by another process (a Redis worker) is announced by that process
(`app.jobs.ending_bell`); hearing it, this process rings the job's waiters with no record, and
they read the table. Without any bell the waiter still reads the table every so often (see
`app.services.job_wait`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar


class EndedJob(Protocol):
    """What a watcher is handed: a job (its record) by id."""

    @property
    def job_id(self) -> str: ...


Job = TypeVar("Job", bound=EndedJob)


class JobEndings(Generic[Job]):
    """Callbacks per job id, called (from the thread that ended the job) with the ended job, or
    with None when another process ended it. `announce`, when set, tells other processes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watchers: dict[str, list[Callable[[Job | None], None]]] = {}
        self.announce: Callable[[list[str]], None] | None = None

    @contextmanager
    def watching(self, job_id: str, wake: Callable[[Job | None], None]) -> Iterator[None]:
        """Call `wake` whenever the job ends while inside this block (with the ended job, or
        None when the end was heard from another process); it must not block."""
        with self._lock:
            self._watchers.setdefault(job_id, []).append(wake)
        try:
            yield
        finally:
            with self._lock:
                watchers = self._watchers.get(job_id, [])
                if wake in watchers:
                    watchers.remove(wake)
                if not watchers:
                    self._watchers.pop(job_id, None)

    def ended(self, jobs: Iterable[Job]) -> None:
        """Ring the watchers of these jobs, each with its job (their end is committed), then
        announce them to other processes."""
        jobs = list(jobs)
        with self._lock:
            woken = [(wake, job) for job in jobs for wake in self._watchers.get(job.job_id, ())]
        for wake, job in woken:
            wake(job)
        if self.announce is not None and jobs:
            self.announce([job.job_id for job in jobs])

    def heard(self, job_ids: Iterable[str]) -> None:
        """Ring the watchers of jobs another process ended (they read the job themselves)."""
        with self._lock:
            woken = [wake for job_id in job_ids for wake in self._watchers.get(job_id, ())]
        for wake in woken:
            wake(None)
