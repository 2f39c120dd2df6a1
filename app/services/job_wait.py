"""Waiting for an ingestion job to end: `GET /jobs/{id}?wait=S` answers as soon as the job is
done or failed, or after S seconds (at most `MAX_WAIT_S`) with its state then.

A client that uploads a file and waits for it learns of the end at once, without polling: the
job store rings the job's watchers when a worker of this process records its end, handing them
the ended job (so the answer needs no read of its own). A job ended in another process (a Redis
worker) rings here when its announcement is heard (`app.jobs.ending_bell`), and the waiter reads
the job; since an announcement can be lost, the waiter also reads the job again every
`RECHECK_S`. The wait is on the event loop, never in a thread: a thousand waiting clients
hold no thread of the pool the other requests share.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from anyio import to_thread

from app.jobs.store import JobRecord
from app.services.uploads import UploadDeps, get_job

MAX_WAIT_S = 30.0
# How often a waiter reads its job again when no doorbell rang (an announcement from another
# process was lost).
RECHECK_S = 0.25
ENDED = ("done", "failed")


async def wait_for_job(
    deps: UploadDeps,
    *,
    tenant_id: str,
    job_id: str,
    wait_s: float,
    recheck_s: float = RECHECK_S,
    check: Callable[[JobRecord], None] | None = None,
) -> JobRecord:
    """The tenant's job once it has ended, or its state after `wait_s` seconds; NotFound as
    `get_job`. `check` is given the job first read (in the same worker thread, before any
    wait): it raises to refuse a caller who may not see the job."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(max(wait_s, 0.0), MAX_WAIT_S)
    rang = asyncio.Event()
    ended: list[JobRecord] = []  # the job as its end was committed, once rung

    def wake(job: JobRecord | None) -> None:  # from the thread that recorded or heard the end
        if job is not None:
            ended.append(job)
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
            loop.call_soon_threadsafe(rang.set)

    def first_read() -> JobRecord:  # the tenant's job (NotFound otherwise), then `check`
        job = get_job(deps, tenant_id=tenant_id, job_id=job_id)
        if check is not None:
            check(job)
        return job

    def read() -> JobRecord:
        return get_job(deps, tenant_id=tenant_id, job_id=job_id)

    with deps.jobs.endings.watching(job_id, wake):
        job = await to_thread.run_sync(first_read)
        while job.status not in ENDED:
            left = deadline - loop.time()
            if left <= 0:
                return job
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(rang.wait(), timeout=min(left, recheck_s))
            rang.clear()  # before the read: an end committed after it rings again
            # Rung by this process's worker: the job as it ended, nothing to read.
            job = ended[-1] if ended else await to_thread.run_sync(read)
        return job
