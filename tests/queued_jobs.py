"""Queue an ingestion job in a test the way an upload does: reserve a slot, then fill it (or, as
a small upload does, take the slot as the job is queued); end
one as a worker does, and write its document's figures as the indexing does; and see whether
anyone still waits on a job's end."""

from __future__ import annotations

from app.jobs.endings import JobEndings
from app.jobs.store import JobDone, JobRecord, JobStore, StorageQuota, StoredUpload, new_job_id
from app.storage.documents import DocumentStore, IndexedFacts

ROOMY = StorageQuota(documents=100, stored_bytes=10**9, chunks=10**6)
# A queue quota no test reaches unless it asks for a smaller one.
NO_QUEUE_LIMIT = 10**6


def queue_job(
    jobs: JobStore,
    tenant_id: str,
    document_id: str,
    source: str,
    stored_path: str,
    size_bytes: int,
    *,
    active_limit: int = NO_QUEUE_LIMIT,
    document_sha256: str = "ab" * 32,
    reserved: bool = True,
) -> JobRecord:
    """The queued job of one stored upload (JobLimitReached when the tenant's queue is full):
    through a reservation, or with `reserved` False in the one transaction that queues it."""
    job_id = jobs.reserve(tenant_id, active_limit) if reserved else new_job_id()
    upload = StoredUpload(job_id, document_id, source, stored_path, size_bytes, document_sha256)
    limit = None if reserved else active_limit
    (job,) = jobs.fill_reservations(tenant_id, [upload], ROOMY, active_limit=limit)
    return job


def mark_done(jobs: JobStore, job_id: str, chunks_indexed: int = 1, pages: int = 1) -> None:
    """End a job well, as a worker does once its file is indexed."""
    jobs.mark_done_many([JobDone(job_id, chunks_indexed, pages)])


def mark_indexed(
    documents: DocumentStore, tenant_id: str, document_id: str, pages: int = 1, chunks: int = 1
) -> None:
    """Record a stored document as indexed (done, with these figures), as the indexing does."""
    found = documents.get(tenant_id, document_id)
    assert found is not None
    facts = IndexedFacts(
        document_id, found.source, found.size_bytes, found.content_sha256, pages, chunks, 0
    )
    documents.record_indexed(tenant_id, [facts], must_exist=True)


def jobs_watched(endings: JobEndings[JobRecord]) -> int:
    """How many jobs someone still waits on: a waiter that left must leave no watch behind."""
    return len(endings._watchers)
