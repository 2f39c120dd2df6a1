"""A container for job-running tests: fake embedder, embedded Chroma, SQLite, a Redis prefix of
the test's own, fast heartbeats; the rq worker on it; and uploads queued the way the upload
route queues them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import select

from app.config import Settings
from app.container import Container
from app.job_runners.redis_worker import IngestWorker
from app.services.uploads import ReceivedFile, reserve_upload, submit_uploads
from app.storage.redis_client import connect_redis
from app.storage.tables import JobRow
from testkit.local_stack import REDIS_URL
from tests.fakes import fake_providers

TEXT = b"The relief valve is inspected every 30 days.\n\nReports go to the safety officer."


@contextmanager
def job_container(
    settings: Settings, redis_namespace: Any, **changes: object
) -> Iterator[Container]:
    """The container (`changes` are further settings); afterwards every rq key of the test's
    queue and jobs is deleted.

    The settings keep the threads backend (an embedded Chroma may not be shared between
    processes); the worker code under test does not look at it.
    """
    fast = settings.model_copy(
        update={
            "redis_key_prefix": redis_namespace.prefix,
            "job_heartbeat_s": 0.05,
            "job_stale_after_s": 0.3,
            "job_retry_base_s": 30.0,
            **changes,
        }
    )
    built = Container(fast, fake_providers())
    yield built
    # rq names its keys after the queue (our prefix) or the message id (our job ids).
    client = redis_namespace.client
    with built.database.session() as session:
        job_ids = session.scalars(select(JobRow.job_id)).all()
    patterns = [f"rq:*{redis_namespace.prefix}*"] + [f"rq:*{job_id}*" for job_id in job_ids]
    for pattern in patterns:
        for key in client.scan_iter(match=pattern, count=1000):
            client.delete(key)
    client.srem("rq:queues", f"rq:queue:{redis_namespace.prefix}-ingest")


def ingest_worker(container: Container) -> IngestWorker:
    """The rq worker `python -m app.worker` builds, on the container's job table and queue."""
    return IngestWorker(container.settings, container.ingest_deps, connect_redis(REDIS_URL))


def work_through(container: Container, worker: IngestWorker) -> None:
    """Let the rq worker run, one turn after another, every job a worker may claim."""
    while container.jobs.has_claimable("worker"):
        worker.process("any")


def queued_upload(
    container: Container,
    data_dir: Path,
    name: str = "valves.txt",
    tenant: str = "acme",
    content: bytes = TEXT,
    placement: dict[str, str] | None = None,
) -> str:
    """Store an upload and create its job row, as the upload route does (into the collection
    `placement` names, default general); returns the job id."""
    uploads = data_dir / "uploads"
    uploads.mkdir(exist_ok=True)
    path = uploads / f"upload-{name}"  # stored like the upload route: random name, same suffix
    path.write_bytes(content)
    reservation = reserve_upload(container.upload_deps, tenant_id=tenant)
    received = ReceivedFile(path, name, len(content))
    (job,) = submit_uploads(
        container.upload_deps,
        tenant_id=tenant,
        reservations=[reservation],
        files=[received],
        placement=placement,
    )
    return job.job_id
