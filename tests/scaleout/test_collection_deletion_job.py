"""Deleting a collection with its documents is a durable job in the job table: a worker that
dies while running it leaves it `processing`, the sweep puts it back, and the next worker
deletes what is left and then the collection, with the progress and audit entries a user
sees. The same name in another collection is another document and stays."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from app.container import Container
from app.job_runners.redis_worker import IngestWorker
from app.jobs.redis_queue import RedisJobQueue
from app.services.audit import Actor
from app.services.collection_deletion import queue_collection_deletion
from app.storage.db import utc_now
from tests.scaleout.job_container import queued_upload, work_through

pytestmark = pytest.mark.integration

T = "acme"


def test_a_deletion_left_processing_by_a_dead_worker_is_finished_by_the_next(
    container: Container, worker: IngestWorker, data_dir: Path
) -> None:
    actor = Actor(T, "usr_admin", None)
    collections = container.collections
    made = collections.create(
        collections.access(tenant_id=T, user_id="usr_admin", role="admin", key_collections=None),
        actor,
        "old-site",
        "",
        "restricted",
    )
    into = {"collection_id": made.collection_id}
    for name in ("boiler.txt", "pump.txt"):
        queued_upload(container, data_dir, name, placement=into)
    queued_upload(container, data_dir, "boiler.txt")  # general's boiler.txt: another document
    work_through(container, worker)
    documents = container.documents.list(T, 10)
    assert len(documents) == 3
    kept = next(d for d in documents if d.collection_id == "general")

    access = collections.access(
        tenant_id=T, user_id="usr_admin", role="admin", key_collections=None
    )
    queue = RedisJobQueue(worker.queue, 60)
    job = queue_collection_deletion(collections, container.jobs, queue, access, actor, "old-site")
    assert job is not None and (job.kind, job.status, job.progress_total) == (
        "collection_delete",
        "queued",
        2,
    )
    again = queue_collection_deletion(collections, container.jobs, queue, access, actor, made.name)
    assert again is not None and again.job_id == job.job_id  # one job, however often asked

    # A worker claims it and dies before deleting anything.
    claimed = container.jobs.claim_next()
    assert claimed is not None and claimed.job_id == job.job_id
    later = utc_now() + timedelta(seconds=5)
    assert worker.sweep(now=later).requeued == 1
    work_through(container, worker)

    ended = container.jobs.get(T, job.job_id)
    assert ended is not None and ended.status == "done", ended
    assert (ended.progress_done, ended.progress_total) == (2, 2)
    assert container.access_store.find_collection(T, "old-site") is None
    assert [d.document_id for d in container.documents.list(T, 10)] == [kept.document_id]
    assert container.corpus.count(T) == kept.chunks
    audit = [
        (e.action, e.detail)
        for e in container.audit_log.page(tenant_id=T, limit=50, offset=0).records
    ]
    assert sum(1 for action, _ in audit if action == "document.deleted") == 2
    assert ("collection.deleted", {"name": "old-site", "documents": 2}) in audit
