"""Deleting a collection with its documents (`DELETE /collections/{id}?documents=delete`) as a
durable job: the API queues a `collection_delete` job in the job table and answers 202 with its
id; a worker (the API's pool or `python -m app.worker`) deletes the documents in batches,
reporting progress on the job, then the emptied collection.

A crash leaves the job `processing`; it is re-queued like an ingestion job and starts over on
what is left, so a document is never deleted twice nor left behind. Documents uploaded into the
collection while it is being deleted are deleted too; if they keep arriving the job fails with
`conflict` and the collection stays, with whatever arrived last.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from app.errors import Conflict, NotFound, RagError
from app.jobs.queue import JobQueue, enqueue
from app.jobs.store import JobDone, JobRecord, JobStore
from app.services.audit import Actor
from app.services.collection_access import CollectionAccess
from app.services.collections import CollectionService
from app.services.documents import delete_documents
from app.services.indexing import DocumentDeps
from app.services.webhooks import DocumentEvents
from app.storage.collections import AccessStore

log = logging.getLogger(__name__)

BATCH_DOCUMENTS = 50  # deleted under one hold of the documents lock, then progress is written
MAX_ROUNDS = 5  # passes over what the collection holds before giving up on late uploads
STAGE = "deleting"


@dataclass(frozen=True)
class DeletionDeps:
    """What deleting a collection needs, built by the container of the process that runs jobs."""

    jobs: JobStore
    collections: AccessStore
    documents: Callable[[], DocumentDeps]  # built when the job runs, as for ingestion
    events: DocumentEvents | None = None  # `collection.deleted` for webhooks


def queue_collection_deletion(
    service: CollectionService,
    jobs: JobStore,
    queue: JobQueue,
    access: CollectionAccess,
    actor: Actor,
    id_or_name: str,
) -> JobRecord | None:
    """Delete a collection the caller manages with its documents: at once when it holds none
    (None), else by the job returned (queued now, or the one already deleting it)."""
    held = service.documents_of(access, id_or_name)
    if not held.document_ids and service.delete(access, actor, held.collection_id):
        return None
    found = service.readable(access, held.collection_id)
    job = jobs.queue_collection_deletion(
        access.tenant_id, held.collection_id, found.name, len(held.document_ids), actor.user_id
    )
    enqueue(queue, [job])
    return job


def run_collection_deletion(deps: DeletionDeps, job: JobRecord) -> None:
    """Delete the job's collection with its documents and record how the job ended; never
    raises (a failure is the job's, with its code)."""
    try:
        deleted = _delete(deps, job)
    except Exception as exc:
        code, message = (
            (exc.code, exc.message)
            if isinstance(exc, RagError)
            else ("internal_error", "internal error while deleting the collection; try again")
        )
        if not isinstance(exc, RagError):
            log.error("collection deletion crashed", exc_info=exc, extra={"job_id": job.job_id})
        deps.jobs.mark_failed(job.job_id, message, code)
        return
    deps.jobs.mark_done_many([JobDone(job.job_id, 0, 0, units=deleted)])
    log.info("collection deleted", extra={"job_id": job.job_id, "documents": deleted})


def _delete(deps: DeletionDeps, job: JobRecord) -> int:
    tenant_id, collection_id = job.tenant_id, job.collection_id
    if collection_id is None:
        raise ValueError("a collection_delete job without its collection")
    actor = Actor(tenant_id, job.requested_by, None)
    documents = deps.documents()
    deleted = 0
    for _ in range(MAX_ROUNDS):
        remaining = deps.collections.document_ids(tenant_id, collection_id)
        total = deleted + len(remaining)
        deps.jobs.update_progress(job.job_id, deleted, total, STAGE)
        for start in range(0, len(remaining), BATCH_DOCUMENTS):
            batch = remaining[start : start + BATCH_DOCUMENTS]
            deleted += delete_documents(
                documents, tenant_id=tenant_id, document_ids=batch, actor=actor
            )
            deps.jobs.update_progress(job.job_id, deleted, total, STAGE)
        entry = actor.entry("collection.deleted", name=job.source, documents=deleted)
        try:
            if deps.collections.delete_collection(tenant_id, collection_id, entry):
                if deps.events is not None:
                    deps.events.collection(
                        tenant_id=tenant_id,
                        event_type="collection.deleted",
                        collection_id=collection_id,
                        name=job.source,
                        documents=deleted,
                    )
                return deleted
        except NotFound:
            return deleted  # deleted meanwhile (by another request): nothing is left to do
    raise Conflict(
        f"documents kept arriving in collection {job.source!r} while it was being deleted; "
        "it is still there: stop the uploads and delete it again"
    )
