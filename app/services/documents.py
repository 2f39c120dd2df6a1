"""Documents of a tenant: accept uploads as jobs, index them, list, show and delete them."""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from contextlib import AbstractContextManager
from pathlib import Path

from app.domain import document_id as make_document_id
from app.errors import IngestionError, NotFound, RateLimited
from app.services.container import Container
from app.services.pages import drop_original, keep_original
from app.services.pipeline import IngestedDocument, ProgressCallback, index_file
from app.storage.documents import DocumentRecord
from app.storage.jobs import JobLimitReached, JobRecord

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


def submit_upload(
    container: Container, tenant_id: str, stored_path: Path, client_filename: str, size: int
) -> JobRecord:
    """Queue an already stored upload for indexing; the caller's file becomes the job's.

    Over the tenant's job limit, RateLimited is raised and the upload leaves nothing behind.
    """
    source = sanitise_filename(client_filename)
    doc_id = make_document_id(tenant_id, source)
    limit = container.settings.max_jobs_per_tenant
    sha = file_sha256(stored_path)  # before the transaction, which must stay short
    try:
        # The job and, if missing, the document row are committed in one transaction, after the
        # limit check: a worker cannot claim the job before its row exists (it would fail it as
        # "deleted before it could be indexed"), and a refused upload writes no row, so there is
        # none to clean up that a concurrent upload of the same name might already rely on.
        job = container.jobs.create(
            tenant_id,
            doc_id,
            source,
            str(stored_path),
            size,
            active_limit=limit,
            document_sha256=sha,
        )
    except JobLimitReached:
        stored_path.unlink(missing_ok=True)
        raise RateLimited(
            f"this tenant already has {limit} ingestion jobs queued or running; wait for one "
            "to finish",
            retry_after_s=5.0,
        ) from None
    log.info("upload queued", extra={"job_id": job.job_id, "document_id": doc_id, "bytes": size})
    return job


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
    done = index_file(
        path,
        tenant_id=tenant_id,
        source=source,
        embedder=container.embedder,
        store=container.store,
        config=container.pipeline_config,
        progress=progress,
    )
    try:
        # A concurrent delete, in this process or another, sees the record before or after this.
        with _document_lock(container, tenant_id, done.document_id):
            if must_exist and container.documents.get(tenant_id, done.document_id) is None:
                container.store.delete_document(tenant_id, done.document_id)
                raise IngestionError(
                    "the document was deleted while it was being indexed; upload it again "
                    "if you still want it"
                )
            container.documents.upsert(
                tenant_id, done.document_id, source, path.stat().st_size, sha
            )
            container.documents.set_status(
                tenant_id, done.document_id, "done", pages=done.pages, chunks=done.chunks
            )
            keep_original(container, tenant_id, done.document_id, source, path)
    finally:
        container.cache.invalidate_tenant(tenant_id)
        if refresh_keywords:
            container.retriever.refresh(tenant_id)
    return done


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
        removed = container.store.delete_document(tenant_id, document_id)
        container.documents.delete(tenant_id, document_id)
        drop_original(container, tenant_id, document_id)
    container.cache.invalidate_tenant(tenant_id)
    container.retriever.refresh(tenant_id)
    log.info("document deleted", extra={"document_id": document_id, "chunks": removed})


def get_job(container: Container, tenant_id: str, job_id: str) -> JobRecord:
    """The tenant's job; NotFound whether missing or another tenant's."""
    job = container.jobs.get(tenant_id, job_id)
    if job is None:
        raise NotFound("job not found")
    return job
