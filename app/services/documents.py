"""Documents of a tenant: accept uploads as jobs, index them, list, show and delete them."""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import shutil
import unicodedata
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from app.domain import document_id as make_document_id
from app.errors import IngestionError, JobQueueFull, NotFound, UnsupportedFileType
from app.jobs.queue import enqueue
from app.jobs.store import JobLimitReached, JobRecord, StorageQuota, StoredUpload
from app.services.container import Container
from app.services.pages import drop_original, keep_original
from app.services.pipeline import IngestedDocument, ProgressCallback, index_file
from app.storage.documents import DocumentRecord

log = logging.getLogger(__name__)

_UNSAFE_NAME_CHARS = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|]+")
MAX_SOURCE_CHARS = 200


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


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _document_lock(
    container: Container, tenant_id: str, document_id: str
) -> AbstractContextManager[None]:
    """Serialises "delete a document" with "record a freshly indexed one" across the API and
    worker processes, so an upload finishing during a delete cannot bring the document back."""
    return container.database.named_lock(f"document:{tenant_id}:{document_id}")


def uploads_dir(container: Container) -> Path:
    """Where uploads wait for their job, under the data directory."""
    return container.settings.data_dir / "uploads"


def storage_quota(container: Container) -> StorageQuota:
    """The per-tenant storage quotas configured by RAG_QUOTA_*."""
    settings = container.settings
    return StorageQuota(
        documents=settings.quota_documents,
        stored_bytes=settings.quota_stored_bytes,
        chunks=settings.quota_chunks,
    )


def reserve_upload(container: Container, tenant_id: str) -> str:
    """Hold a job slot of the tenant before its upload is received; the reservation id.

    A tenant whose queue is at RAG_QUOTA_QUEUED_JOBS gets JobQueueFull (429) and nothing is
    written, not even the upload.
    """
    limit = container.settings.quota_queued_jobs
    try:
        return container.jobs.reserve(tenant_id, limit)
    except JobLimitReached:
        raise JobQueueFull(
            f"tenant quota exceeded: queued_jobs (limit {limit} ingestion jobs waiting or "
            "running); retry when some have finished",
            retry_after_s=5.0,
        ) from None


def release_upload(container: Container, tenant_id: str, reservation: str) -> None:
    """Give back the job slot of an upload that failed before it became a job."""
    container.jobs.cancel_reservation(tenant_id, reservation)


@dataclass
class ReceivedFile:
    """A file the client sent, stored on disk under a generated name (counted while received)."""

    path: Path
    client_filename: str
    size_bytes: int


def submit_uploads(
    container: Container, tenant_id: str, reservations: list[str], files: list[ReceivedFile]
) -> list[JobRecord]:
    """Queue a request's stored files as the jobs their reservations held, all or none, and hand
    them to the workers; the caller's files become the jobs'.

    Over a storage quota, QuotaExceeded (413) is raised and the files, their reservations and
    any rows are gone.
    """
    try:
        uploads = [
            _stored_upload(tenant_id, reservation, file)
            for reservation, file in zip(reservations, files, strict=True)
        ]
        # The jobs and, if missing, the document rows are committed in one transaction, after
        # the quota check: a worker cannot claim a job before its row exists (it would fail it
        # as "deleted before it could be indexed"), and a refused upload writes no row, so there
        # is none to clean up that a concurrent upload of the same name might already rely on.
        jobs = container.jobs.fill_reservations(tenant_id, uploads, storage_quota(container))
    except BaseException:
        for file in files:
            file.path.unlink(missing_ok=True)
        for reservation in reservations:
            release_upload(container, tenant_id, reservation)
        raise
    for job in jobs:
        log.info(
            "upload queued",
            extra={"job_id": job.job_id, "document_id": job.document_id, "bytes": job.size_bytes},
        )
    enqueue(container, jobs)  # after the commit: a worker never sees a job before its row
    return jobs


def _stored_upload(tenant_id: str, reservation: str, file: ReceivedFile) -> StoredUpload:
    source = sanitise_filename(file.client_filename)
    return StoredUpload(
        job_id=reservation,
        document_id=make_document_id(tenant_id, source),
        source=source,
        stored_path=str(file.path),
        size_bytes=file.size_bytes,
        document_sha256=file_sha256(file.path),  # before the transaction, which stays short
    )


def chunk_allowance(container: Container, tenant_id: str, document_id: str) -> int:
    """How many chunks this document may have within the tenant's chunk quota."""
    others = container.documents.usage(tenant_id, except_document=document_id)
    return max(container.settings.quota_chunks - others.chunks, 0)


def index_document(
    container: Container,
    tenant_id: str,
    path: Path,
    source: str,
    progress: ProgressCallback | None = None,
    *,
    must_exist: bool = False,
    refresh_keywords: bool = True,
) -> IngestedDocument:
    """Index one stored file for a tenant and record it; invalidates the tenant's answers.

    With `must_exist` (a queued upload), a document deleted while it was being indexed stays
    deleted: its fresh chunks are removed again and IngestionError says so. Without
    `refresh_keywords` the keyword index is left to the next query or job to bring up to date
    (queries always check it is current).
    """
    sha = file_sha256(path)
    doc_id = make_document_id(tenant_id, source)
    done = index_file(
        path,
        tenant_id=tenant_id,
        source=source,
        embedder=container.embedder,
        corpus=container.corpus,
        config=container.pipeline_config,
        progress=progress,
        max_chunks=chunk_allowance(container, tenant_id, doc_id),
    )
    try:
        record_indexed(container, tenant_id, done, path, sha, must_exist=must_exist)
    finally:
        container.cache.invalidate_tenant(tenant_id)
        if refresh_keywords:
            container.retriever.refresh(tenant_id)
    return done


def record_indexed(
    container: Container,
    tenant_id: str,
    done: IngestedDocument,
    upload: Path,
    sha256: str,
    *,
    must_exist: bool,
) -> None:
    """Record a document whose chunks were just stored (status done, pages, chunks), keeping
    the uploaded PDF so its pages can be shown.

    With `must_exist`, a document deleted meanwhile loses its fresh chunks again and
    IngestionError says so. The caller invalidates the tenant's answers afterwards.
    """
    # A concurrent delete, in this process or another, sees the record before or after this.
    with _document_lock(container, tenant_id, done.document_id):
        if must_exist and container.documents.get(tenant_id, done.document_id) is None:
            container.corpus.delete_document(tenant_id, done.document_id)
            raise IngestionError(
                "the document was deleted while it was being indexed; upload it again "
                "if you still want it"
            )
        container.documents.upsert(
            tenant_id, done.document_id, done.source, upload.stat().st_size, sha256
        )
        container.documents.set_status(
            tenant_id, done.document_id, "done", pages=done.pages, chunks=done.chunks
        )
        keep_original(container, tenant_id, done.document_id, done.source, upload)


def queue_local_file(container: Container, tenant_id: str, path: Path) -> JobRecord:
    """Hand a local file to the service's workers as an upload would be (CLI `ingest --queue`):
    a copy under the uploads folder becomes a queued job, sent with the one `enqueue`."""
    from app.ingestion import SUPPORTED_EXTENSIONS
    from app.services.users import validate_tenant_id

    validate_tenant_id(tenant_id)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_EXTENSIONS:
        allowed = ", ".join(sorted(SUPPORTED_EXTENSIONS))
        raise UnsupportedFileType(
            f"files of type {suffix or '(none)'!r} are not supported; use one of {allowed}"
        )
    reservation = reserve_upload(container, tenant_id)
    stored = uploads_dir(container) / f"{secrets.token_hex(16)}{suffix}"
    try:
        stored.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, stored)
    except BaseException:
        stored.unlink(missing_ok=True)
        release_upload(container, tenant_id, reservation)
        raise
    received = ReceivedFile(stored, path.name, stored.stat().st_size)
    (job,) = submit_uploads(container, tenant_id, [reservation], [received])
    return job


def ingest_local_file(
    container: Container, tenant_id: str, path: Path, progress: ProgressCallback | None = None
) -> IngestedDocument:
    """Index a local file synchronously (the CLI path); its file name is the document source."""
    from app.services.users import validate_tenant_id

    validate_tenant_id(tenant_id)
    return index_document(container, tenant_id, path, sanitise_filename(path.name), progress)


def list_documents(
    container: Container, tenant_id: str, limit: int, offset: int
) -> tuple[list[DocumentRecord], int]:
    """One page of the tenant's documents and the total count."""
    return (
        container.documents.list(tenant_id, limit, offset),
        container.documents.count(tenant_id),
    )


def get_document(container: Container, tenant_id: str, document_id: str) -> DocumentRecord:
    """The tenant's document; NotFound whether missing or another tenant's."""
    record = container.documents.get(tenant_id, document_id)
    if record is None:
        raise NotFound("document not found")
    return record


def delete_document(container: Container, tenant_id: str, document_id: str) -> None:
    """Remove a document's chunks and record; no search or answer reaches it afterwards."""
    with _document_lock(container, tenant_id, document_id):
        if container.documents.get(tenant_id, document_id) is None:
            raise NotFound("document not found")
        removed = container.corpus.delete_document(tenant_id, document_id)
        container.documents.delete(tenant_id, document_id)
        drop_original(container, tenant_id, document_id)
    container.cache.invalidate_tenant(tenant_id)
    container.retriever.refresh(tenant_id)
    log.info("document deleted", extra={"document_id": document_id, "chunks": removed})


def get_job(container: Container, tenant_id: str, job_id: str) -> JobRecord:
    """The tenant's job; NotFound whether missing, another tenant's, or an upload still being
    received (its id is not given out until the job exists)."""
    job = container.jobs.get(tenant_id, job_id)
    if job is None or job.status == "reserved":
        raise NotFound("job not found")
    return job
