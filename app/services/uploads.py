"""Uploads of a tenant accepted as jobs: hold a job slot, store the file, queue the job; and
reading those jobs back."""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.domain import GENERAL_COLLECTION, ListedPage
from app.errors import DocumentNameTaken, InvalidInput, JobQueueFull, NotFound, QuotaExceeded
from app.jobs.queue import JobQueue, enqueue
from app.jobs.store import (
    COLLECTION_DELETE,
    EVALUATION_RUN,
    JobLimitReached,
    JobRecord,
    JobStatus,
    JobStore,
    StorageQuota,
    StoredUpload,
    new_job_id,
)
from app.services.audit import AuditLog
from app.services.documents import Uploader
from app.services.indexing import file_sha256
from app.storage.documents import DocumentStore
from app.text.arabic import BIDI_CONTROLS

log = logging.getLogger(__name__)

# Control characters, path and shell specials, and the bidirectional-text controls that
# reorder how the rest of a name reads ("invoice<U+202E>fdp.txt" shows as "invoicetxt.pdf").
_UNSAFE_NAME_CHARS = re.compile(rf"[\x00-\x1f\x7f{BIDI_CONTROLS}/\\:*?\"<>|]+")
MAX_SOURCE_CHARS = 200


@dataclass(frozen=True)
class UploadDeps:
    """What accepting uploads as jobs and reading those jobs needs, built by the container."""

    jobs: JobStore
    queue: JobQueue  # where accepted jobs go (RAG_JOB_BACKEND)
    uploads_dir: Path  # where uploads wait for their job, under the data directory
    max_upload_bytes: int
    quota: StorageQuota
    queued_jobs_limit: int  # RAG_QUOTA_QUEUED_JOBS
    documents: DocumentStore  # the documents uploads replace, and who uploaded them
    audit: AuditLog  # uploads and quota refusals


def sanitise_filename(raw: str) -> str:
    """The client's file name reduced to a safe display name (no path, no control chars)."""
    name = unicodedata.normalize("NFC", raw).replace("\\", "/").rsplit("/", 1)[-1]
    name = _UNSAFE_NAME_CHARS.sub("_", name).strip()
    # The suffix is taken before the stem is trimmed, so ".pdf" stays a PDF ("upload.pdf").
    stem, dot, extension = name.rpartition(".")
    suffix = f".{extension.lower()}" if dot and extension and extension.strip() == extension else ""
    stem = stem if suffix else name
    stem = stem.strip(" .")[: MAX_SOURCE_CHARS - len(suffix)].rstrip(" .") or "upload"
    return stem + suffix


def reserve_upload(deps: UploadDeps, *, tenant_id: str, uploader: Uploader | None = None) -> str:
    """Hold a job slot of the tenant before its upload is received; the reservation id.

    A tenant whose queue is at RAG_QUOTA_QUEUED_JOBS gets JobQueueFull (429) and nothing is
    written, not even the upload.
    """
    try:
        return deps.jobs.reserve(tenant_id, deps.queued_jobs_limit)
    except JobLimitReached:
        raise _queue_full(deps, uploader) from None


def _queue_full(deps: UploadDeps, uploader: Uploader | None) -> JobQueueFull:
    """The refusal of an upload over the tenant's queue quota, audited."""
    limit = deps.queued_jobs_limit
    if uploader is not None:
        refusal = uploader.actor.entry("quota.refused", quota="queued_jobs", limit=limit)
        deps.audit.record(refusal)
    return JobQueueFull(
        f"tenant quota exceeded: queued_jobs (limit {limit} ingestion jobs waiting or "
        "running); retry when some have finished",
        retry_after_s=5.0,
    )


def release_upload(deps: UploadDeps, *, tenant_id: str, reservation: str) -> None:
    """Give back the job slot of an upload that failed before it became a job."""
    deps.jobs.cancel_reservation(tenant_id, reservation)


@dataclass
class ReceivedFile:
    """A file the client sent, stored on disk under a generated name (counted while received)."""

    path: Path
    client_filename: str
    size_bytes: int
    source: str | None = None  # the document name, when not the client's file name (a sync)
    sha256: str | None = None  # its content hash, once taken (a sync compares it first)

    @property
    def document_name(self) -> str:
        """The name of the document it becomes: `source`, else the client's file name made
        safe."""
        return self.source or sanitise_filename(self.client_filename)


# Times a request is queued when uploads of the same new name race to create its document: the
# second try finds the document the winner made, so more are needed only under a stream of them.
NAME_RACE_ATTEMPTS = 3


def submit_uploads(
    deps: UploadDeps,
    *,
    tenant_id: str,
    reservations: list[str] | None,
    files: list[ReceivedFile],
    uploader: Uploader | None = None,
    placement: Mapping[str, str] | None = None,
    known: Mapping[str, str] | None = None,
) -> list[JobRecord]:
    """Queue a request's stored files as the jobs their reservations held, all or none, and hand
    them to the workers; the caller's files become the jobs'. `known` gives the ids of documents
    the caller has just found by name in the collection (not looked up again).

    `reservations` None: a small request read before any slot was taken; its jobs take their
    slots of the queue quota as they are queued (JobQueueFull, 429, and nothing kept, when the
    tenant has none left).

    Over a storage quota, QuotaExceeded (413) is raised and the files, their reservations and
    any rows are gone; a member replacing someone else's document gets Forbidden the same way.
    Without an uploader (the CLI) nothing is attributed or audited.
    """
    try:
        _check_one_file_per_name(files)
        collection_id = (placement or {}).get("collection_id", GENERAL_COLLECTION)
        job_ids = reservations if reservations is not None else [new_job_id() for _ in files]
        for attempt in range(1, NAME_RACE_ATTEMPTS + 1):
            try:
                jobs = _queue_files(
                    deps,
                    tenant_id,
                    collection_id,
                    job_ids,
                    files,
                    uploader,
                    placement,
                    # A retry looks every name up again: the racer's document is there now.
                    known if attempt == 1 else None,
                    active_limit=None if reservations is not None else deps.queued_jobs_limit,
                )
                break
            except DocumentNameTaken:
                # Another upload created a document of one of these names meanwhile; nothing
                # was written, so the files are queued again, as that document's new version.
                if attempt == NAME_RACE_ATTEMPTS:
                    raise
                log.info("upload raced another of the same name; queued again")
    except JobLimitReached:
        discard_uploads(deps, tenant_id=tenant_id, reservations=reservations, files=files)
        raise _queue_full(deps, uploader) from None
    except QuotaExceeded as exc:
        discard_uploads(deps, tenant_id=tenant_id, reservations=reservations, files=files)
        if uploader is not None:
            deps.audit.record(uploader.actor.entry("quota.refused", quota=exc.quota))
        raise
    except BaseException:
        discard_uploads(deps, tenant_id=tenant_id, reservations=reservations, files=files)
        raise
    for job in jobs:
        log.info(
            "upload queued",
            extra={"job_id": job.job_id, "document_id": job.document_id, "bytes": job.size_bytes},
        )
    enqueue(deps.queue, jobs)  # after the commit: a worker never sees a job before its row
    return jobs


def _check_one_file_per_name(files: list[ReceivedFile]) -> None:
    """InvalidInput when two files of a request name one document (after the names are made
    safe): both would be queued as its versions, and whichever job ran last would be kept."""
    seen: dict[str, str] = {}
    for file in files:
        source = file.document_name
        if source in seen:
            raise InvalidInput(
                f"two files of this request are named {source!r} (sent as {seen[source]!r} and "
                f"{file.client_filename!r}); a document has one file: send one of them"
            )
        seen[source] = file.client_filename


def _queue_files(
    deps: UploadDeps,
    tenant_id: str,
    collection_id: str,
    job_ids: list[str],
    files: list[ReceivedFile],
    uploader: Uploader | None,
    placement: Mapping[str, str] | None,
    known: Mapping[str, str] | None,
    *,
    active_limit: int | None,
) -> list[JobRecord]:
    """The files' jobs queued and their documents' rows written, in one transaction (see
    `JobStore.fill_reservations`), each file under the document its name has in the collection."""
    uploads = [
        _stored_upload(deps.documents, tenant_id, collection_id, job_id, file, known or {})
        for job_id, file in zip(job_ids, files, strict=True)
    ]
    audit = []
    if uploader is not None:
        for upload in uploads:
            # An uploader who may change any document (checked already) needs no look.
            existing = None
            if not uploader.may_change_any:
                existing = deps.documents.get(tenant_id, upload.document_id)
            if existing is not None:
                uploader.check_may_change(existing, "replace")
            audit.append(
                uploader.actor.entry(
                    "document.uploaded",
                    target_id=upload.document_id,
                    source=upload.source,
                    size_bytes=upload.size_bytes,
                )
            )
    # The jobs and, if missing, the document rows are committed in one transaction, after
    # the quota check: a worker cannot claim a job before its row exists (it would fail it
    # as "deleted before it could be indexed"), and a refused upload writes no row, so there
    # is none to clean up that a concurrent upload of the same name might already rely on.
    return deps.jobs.fill_reservations(
        tenant_id,
        uploads,
        deps.quota,
        uploaded_by=uploader.actor.user_id if uploader else None,
        audit=audit,
        placement=placement,
        active_limit=active_limit,
    )


def discard_uploads(
    deps: UploadDeps, *, tenant_id: str, reservations: list[str] | None, files: list[ReceivedFile]
) -> None:
    """Remove uploads that will not be queued and release their reservations (if any)."""
    for file in files:
        file.path.unlink(missing_ok=True)
    for reservation in reservations or ():
        release_upload(deps, tenant_id=tenant_id, reservation=reservation)


def _stored_upload(
    documents: DocumentStore,
    tenant_id: str,
    collection_id: str,
    job_id: str,
    file: ReceivedFile,
    known: Mapping[str, str],
) -> StoredUpload:
    source = file.document_name
    document_id = known.get(source) or documents.identify(tenant_id, collection_id, source)
    return StoredUpload(
        job_id=job_id,
        document_id=document_id,
        source=source,
        stored_path=str(file.path),
        size_bytes=file.size_bytes,
        # Before the transaction, which stays short.
        document_sha256=file.sha256 or file_sha256(file.path),
    )


def list_jobs(
    deps: UploadDeps,
    *,
    tenant_id: str,
    statuses: Sequence[JobStatus],
    limit: int,
    offset: int,
    collections: Collection[str] | None = None,
    user_id: str | None = None,
    every_run: bool = False,
) -> ListedPage[JobRecord]:
    """The tenant's jobs in `statuses` (uploads still being received are not jobs yet); with
    `collections`, those of documents in them, deletions of them, and the deletions, uploads
    of documents deleted since and evaluation runs `user_id` asked for (every run with
    `every_run`)."""
    return deps.jobs.page(tenant_id, statuses, limit, offset, collections, user_id, every_run)


def job_readable(
    job: JobRecord,
    readable: Callable[[str], bool],
    *,
    user_id: str | None,
    collection_of: Callable[[str], str | None],
    every_run: bool = False,
) -> bool:
    """Whether a caller may see a job: one of a document in a collection it reads (by
    `collection_of`), or a deletion of a collection it reads, or one it asked for: a deletion
    (the deleted collection is gone by the end), an evaluation run (any, with `every_run`), or
    an upload whose document was deleted since (its uploader still learns how it ended)."""
    mine = user_id is not None and job.requested_by == user_id
    if job.kind == COLLECTION_DELETE:
        return mine or (job.collection_id is not None and readable(job.collection_id))
    if job.kind == EVALUATION_RUN:
        return mine or every_run
    where = collection_of(job.document_id)
    return mine if where is None else readable(where)


def get_job(deps: UploadDeps, *, tenant_id: str, job_id: str) -> JobRecord:
    """The tenant's job; NotFound whether missing, another tenant's, or an upload still being
    received (its id is not given out until the job exists)."""
    job = deps.jobs.get(tenant_id, job_id)
    if job is None or job.status == "reserved":
        raise NotFound("job not found")
    return job
