"""Documents of a tenant: accept uploads as jobs, index them, list, show and delete them."""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import shutil
import unicodedata
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from app.domain import document_id as make_document_id
from app.errors import (
    Forbidden,
    IngestionError,
    JobQueueFull,
    NotFound,
    QuotaExceeded,
    UnsupportedFileType,
)
from app.ingestion.parse_turn import ParseTurn
from app.jobs.queue import JobQueue, enqueue
from app.jobs.store import (
    JobLimitReached,
    JobRecord,
    JobStatus,
    JobStore,
    StorageQuota,
    StoredUpload,
)
from app.services.audit import Actor, AuditLog
from app.services.pages import KeptOriginals
from app.services.pipeline import (
    EmbeddingProgress,
    FileProgress,
    IngestedDocument,
    ParsedFile,
    PipelineConfig,
    ProgressCallback,
    check_chunk_quota,
    embed_files,
    embed_second,
    job_stage,
    parse_file,
)
from app.storage.documents import DocumentRecord, DocumentStore, IndexedFacts

if TYPE_CHECKING:
    from app.providers.types import Embedder
    from app.services.corpus import Corpus
    from app.storage.cache import AnswerCache

log = logging.getLogger(__name__)

Listed = TypeVar("Listed")  # what a listing holds: DocumentRecord or JobRecord

_UNSAFE_NAME_CHARS = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|]+")
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
    documents: DocumentStore  # who uploaded a document being replaced
    audit: AuditLog  # uploads and quota refusals


@dataclass(frozen=True)
class DocumentDeps:
    """What indexing, listing and deleting a tenant's documents needs, built by the container."""

    documents: DocumentStore
    corpus: Corpus
    embedder: Embedder
    cache: AnswerCache
    refresh_keywords: Callable[[str], None]  # rebuilds a tenant's keyword index
    # A lock held across processes by name (the database's), see `_documents_lock`.
    named_lock: Callable[[str], AbstractContextManager[None]]
    originals: KeptOriginals
    pipeline: PipelineConfig
    chunk_quota: int  # RAG_QUOTA_CHUNKS
    ocr_page_quota: int | None = None  # RAG_QUOTA_OCR_PAGES (None: no quota)


@dataclass(frozen=True)
class Uploader:
    """Who uploads or deletes: a member changes only documents they uploaded, an admin any."""

    actor: Actor
    may_change_any: bool

    def check_may_change(self, document: DocumentRecord, verb: str) -> None:
        """Forbidden unless this uploader may replace or delete the document."""
        if not self.may_change_any and document.uploaded_by != self.actor.user_id:
            raise Forbidden(
                f"you can {verb} only documents you uploaded; {document.source!r} was uploaded "
                "by someone else (an admin can)"
            )


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


def _documents_lock(deps: DocumentDeps, tenant_id: str) -> AbstractContextManager[None]:
    """Serialises "delete a document" with "record freshly indexed ones" across the API and
    worker processes, so an upload finishing during a delete cannot bring the document back.
    One lock per tenant, so a batch's documents are recorded together under one lock."""
    return deps.named_lock(f"documents:{tenant_id}")


def reserve_upload(deps: UploadDeps, tenant_id: str, uploader: Uploader | None = None) -> str:
    """Hold a job slot of the tenant before its upload is received; the reservation id.

    A tenant whose queue is at RAG_QUOTA_QUEUED_JOBS gets JobQueueFull (429) and nothing is
    written, not even the upload.
    """
    limit = deps.queued_jobs_limit
    try:
        return deps.jobs.reserve(tenant_id, limit)
    except JobLimitReached:
        if uploader is not None:
            refusal = uploader.actor.entry("quota.refused", quota="queued_jobs", limit=limit)
            deps.audit.record(refusal)
        raise JobQueueFull(
            f"tenant quota exceeded: queued_jobs (limit {limit} ingestion jobs waiting or "
            "running); retry when some have finished",
            retry_after_s=5.0,
        ) from None


def release_upload(deps: UploadDeps, tenant_id: str, reservation: str) -> None:
    """Give back the job slot of an upload that failed before it became a job."""
    deps.jobs.cancel_reservation(tenant_id, reservation)


@dataclass
class ReceivedFile:
    """A file the client sent, stored on disk under a generated name (counted while received)."""

    path: Path
    client_filename: str
    size_bytes: int


def submit_uploads(
    deps: UploadDeps,
    tenant_id: str,
    reservations: list[str],
    files: list[ReceivedFile],
    uploader: Uploader | None = None,
    placement: Mapping[str, str] | None = None,
) -> list[JobRecord]:
    """Queue a request's stored files as the jobs their reservations held, all or none, and hand
    them to the workers; the caller's files become the jobs'.

    Over a storage quota, QuotaExceeded (413) is raised and the files, their reservations and
    any rows are gone; a member replacing someone else's document gets Forbidden the same way.
    Without an uploader (the CLI) nothing is attributed or audited.
    """
    try:
        uploads = [
            _stored_upload(tenant_id, reservation, file)
            for reservation, file in zip(reservations, files, strict=True)
        ]
        audit = []
        if uploader is not None:
            for upload in uploads:
                existing = deps.documents.get(tenant_id, upload.document_id)
                if existing is not None:
                    uploader.check_may_change(existing, "replace")
                audit.append(
                    uploader.actor.entry(
                        "document.uploaded",
                        upload.document_id,
                        source=upload.source,
                        size_bytes=upload.size_bytes,
                    )
                )
        # The jobs and, if missing, the document rows are committed in one transaction, after
        # the quota check: a worker cannot claim a job before its row exists (it would fail it
        # as "deleted before it could be indexed"), and a refused upload writes no row, so there
        # is none to clean up that a concurrent upload of the same name might already rely on.
        jobs = deps.jobs.fill_reservations(
            tenant_id,
            uploads,
            deps.quota,
            uploaded_by=uploader.actor.user_id if uploader else None,
            audit=audit,
            placement=placement,
        )
    except QuotaExceeded as exc:
        _discard(deps, tenant_id, reservations, files)
        if uploader is not None:
            deps.audit.record(uploader.actor.entry("quota.refused", quota=exc.quota))
        raise
    except BaseException:
        _discard(deps, tenant_id, reservations, files)
        raise
    for job in jobs:
        log.info(
            "upload queued",
            extra={"job_id": job.job_id, "document_id": job.document_id, "bytes": job.size_bytes},
        )
    enqueue(deps.queue, jobs)  # after the commit: a worker never sees a job before its row
    return jobs


def _discard(
    deps: UploadDeps, tenant_id: str, reservations: list[str], files: list[ReceivedFile]
) -> None:
    for file in files:
        file.path.unlink(missing_ok=True)
    for reservation in reservations:
        release_upload(deps, tenant_id, reservation)


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


@dataclass(frozen=True)
class IndexRequest:
    """One stored file to index for a tenant under its document name (`source`)."""

    path: Path
    source: str
    progress: ProgressCallback | None = None  # parse progress and embedding progress
    sha256: str | None = None  # of the file, when the caller already hashed it
    turn: ParseTurn | None = None  # a queued job's deadline and OCR turns


# What became of one request: the indexed document, or why it was not indexed.
IndexOutcome = IngestedDocument | Exception


@dataclass
class _Parsed:
    """A request whose file is parsed and within quota, waiting for the shared embedding."""

    position: int  # in the caller's list of requests
    parsed: ParsedFile
    sha256: str
    replaces: _Replaced


@dataclass(frozen=True)
class _Replaced:
    """What the indexed version a file replaces counts against the quotas (0 for a new one)."""

    chunks: int
    ocr_pages: int


def index_documents(
    deps: DocumentDeps,
    tenant_id: str,
    requests: list[IndexRequest],
    *,
    must_exist: bool = False,
    refresh_keywords: Callable[[], bool] | None = None,
    embedding_progress: EmbeddingProgress | None = None,
) -> list[IndexOutcome]:
    """Index stored files of one tenant together and record each; one outcome per request, in
    order (never raises for a file's own failure). Invalidates the tenant's answers once.

    Each file is parsed and quota-checked on its own (a bad file fails only its own request),
    then all chunks are embedded in full batches and stored in one write. If that shared step
    fails, each file is indexed again alone, so every request gets the outcome it would have
    had by itself. With `must_exist` (queued uploads), a document deleted before or while it
    is indexed stays deleted and its request fails with IngestionError. `refresh_keywords` is
    asked once at the end whether to rebuild the keyword index now (None: always; otherwise the
    next query or batch brings it up to date). `embedding_progress` replaces the requests' own
    progress callbacks for the embedding stage: (position, done, total) of several at once.
    """
    outcomes: list[IndexOutcome] = []
    try:
        for segment in _distinct_documents(tenant_id, requests):
            outcomes += _index_together(
                deps, tenant_id, segment, len(outcomes), must_exist, embedding_progress
            )
    finally:
        deps.cache.invalidate_tenant(tenant_id)
        _refresh_keywords(deps, tenant_id, refresh_keywords)
    return outcomes


def _refresh_keywords(
    deps: DocumentDeps, tenant_id: str, wanted: Callable[[], bool] | None
) -> None:
    """Rebuild the tenant's keyword index now if `wanted` (None: always). A failure is logged,
    not raised: the documents are indexed, and the next query rebuilds the index."""
    try:
        if wanted is None or wanted():
            deps.refresh_keywords(tenant_id)
    except Exception:
        log.exception("keyword index refresh after indexing failed; the next query rebuilds it")


def index_document(
    deps: DocumentDeps,
    tenant_id: str,
    path: Path,
    source: str,
    progress: ProgressCallback | None = None,
) -> IngestedDocument:
    """Index one stored file for a tenant and record it (`index_documents` for one file);
    raises what made it fail."""
    (outcome,) = index_documents(deps, tenant_id, [IndexRequest(path, source, progress)])
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def _distinct_documents(tenant_id: str, requests: list[IndexRequest]) -> list[list[IndexRequest]]:
    """Split into consecutive runs without a repeated document, so a re-upload of the same
    name in one batch still replaces the earlier version in order."""
    segments: list[list[IndexRequest]] = [[]]
    seen: set[str] = set()
    for request in requests:
        doc_id = make_document_id(tenant_id, request.source)
        if doc_id in seen:
            segments.append([])
            seen.clear()
        segments[-1].append(request)
        seen.add(doc_id)
    return [segment for segment in segments if segment]


def _index_together(
    deps: DocumentDeps,
    tenant_id: str,
    requests: list[IndexRequest],
    offset: int,
    must_exist: bool,
    embedding_progress: EmbeddingProgress | None,
) -> list[IndexOutcome]:
    outcomes: dict[int, IndexOutcome] = {}  # by position in `requests`
    ready: list[_Parsed] = []
    try:  # what the quotas leave, counted once for the batch, then file by file
        left = _Allowance.of(deps, tenant_id)
    except Exception as exc:
        return [exc] * len(requests)
    for position, request in enumerate(requests):
        try:
            item = _parse(deps, tenant_id, request, position, left, must_exist)
        except Exception as exc:
            outcomes[position] = exc
            continue
        ready.append(item)
        left.take(item)
    if not ready:
        return _in_order(outcomes)

    def report(reports: list[FileProgress]) -> None:
        # `file` counts the files embedded together; the caller counts its whole request list.
        moved = [replace(r, file=ready[r.file].position) for r in reports]
        if embedding_progress is not None:
            embedding_progress([replace(r, file=offset + r.file) for r in moved])
            return
        for r in moved:
            progress = requests[r.file].progress
            if progress is not None:
                progress(r.done, r.total, "embedding")

    try:
        with job_stage("embed"):
            vectors = embed_files(
                [p.parsed.chunks for p in ready],
                deps.embedder,
                deps.pipeline.batch_size,
                report,
                deps.pipeline.embed_section_paths,
            )
        second = embed_second(deps.corpus, [p.parsed.chunks for p in ready])
        with job_stage("store"):
            deps.corpus.replace_documents(
                tenant_id,
                [
                    (p.parsed.document_id, p.parsed.chunks, v)
                    for p, v in zip(ready, vectors, strict=True)
                ],
                second_vectors=second,
            )
    except Exception as exc:
        if len(ready) == 1:
            outcomes[ready[0].position] = exc
            return _in_order(outcomes)
        # Not a problem of one file: let each meet the failure (or success) on its own.
        log.warning("batch of %d files failed; indexing them one by one", len(ready), exc_info=True)
        for p in ready:
            (outcomes[p.position],) = _index_together(
                deps,
                tenant_id,
                [requests[p.position]],
                offset + p.position,
                must_exist,
                embedding_progress,
            )
        return _in_order(outcomes)
    indexed = [(p, _Indexed.of(p, requests[p.position].path)) for p in ready]
    try:
        recorded = _record_indexed(deps, tenant_id, [i for _, i in indexed], must_exist)
    except Exception as exc:
        # Not a problem of one file (the shared transaction failed): record each on its own.
        recorded = (
            [exc]
            if len(indexed) == 1
            else [_record_one(deps, tenant_id, one, must_exist) for _, one in indexed]
        )
    for (p, _), outcome in zip(indexed, recorded, strict=True):
        outcomes[p.position] = outcome
    return _in_order(outcomes)


def _in_order(outcomes: dict[int, IndexOutcome]) -> list[IndexOutcome]:
    return [outcomes[position] for position in sorted(outcomes)]


@dataclass
class _Allowance:
    """What the tenant's chunk and OCR page quotas leave (None: no OCR quota), the versions
    being replaced counted as gone."""

    chunks: int
    ocr_pages: int | None

    @classmethod
    def of(cls, deps: DocumentDeps, tenant_id: str) -> _Allowance:
        used = deps.documents.usage(tenant_id)
        ocr_quota = deps.ocr_page_quota
        ocr_left = None if ocr_quota is None else ocr_quota - used.ocr_pages
        return cls(deps.chunk_quota - used.chunks, ocr_left)

    def take(self, done: _Parsed) -> None:
        """Count a file of the batch as indexed (its old version as gone)."""
        parsed = done.parsed
        self.chunks -= len(parsed.chunks) - done.replaces.chunks
        if self.ocr_pages is not None:
            self.ocr_pages -= parsed.ocr.pages - done.replaces.ocr_pages


def _parse(
    deps: DocumentDeps,
    tenant_id: str,
    request: IndexRequest,
    position: int,
    left: _Allowance,
    must_exist: bool,
) -> _Parsed:
    """Parse one request's file and check it against what the quotas leave it (`left`: after
    the tenant's documents and the files before it in the batch)."""
    doc_id = make_document_id(tenant_id, request.source)
    record = deps.documents.get(tenant_id, doc_id)
    if must_exist and record is None:
        raise IngestionError("the document was deleted before it could be indexed")
    sha = request.sha256 or file_sha256(request.path)
    old = _Replaced(record.chunks, record.ocr_pages) if record is not None else _Replaced(0, 0)
    parsed = parse_file(
        request.path,
        tenant_id=tenant_id,
        source=request.source,
        config=deps.pipeline,
        progress=request.progress,
        turn=request.turn,
        ocr_pages_allowed=None
        if left.ocr_pages is None
        else max(left.ocr_pages + old.ocr_pages, 0),
    )
    check_chunk_quota(parsed, max(left.chunks + old.chunks, 0))
    return _Parsed(position, parsed, sha, old)


@dataclass(frozen=True)
class _Indexed:
    """A document whose chunks were just stored, to be recorded."""

    document: IngestedDocument
    upload: Path
    facts: IndexedFacts

    @classmethod
    def of(cls, parsed: _Parsed, upload: Path) -> _Indexed:
        file = parsed.parsed
        document = IngestedDocument(
            file.document_id, file.source, file.pages, len(file.chunks), file.ocr
        )
        facts = IndexedFacts(
            file.document_id,
            file.source,
            upload.stat().st_size,
            parsed.sha256,
            file.pages,
            len(file.chunks),
            file.ocr.pages,
        )
        return cls(document, upload, facts)


def _record_one(
    deps: DocumentDeps, tenant_id: str, indexed: _Indexed, must_exist: bool
) -> IndexOutcome:
    try:
        (outcome,) = _record_indexed(deps, tenant_id, [indexed], must_exist)
    except Exception as exc:
        return exc
    return outcome


def _record_indexed(
    deps: DocumentDeps, tenant_id: str, indexed: list[_Indexed], must_exist: bool
) -> list[IndexOutcome]:
    """Record documents whose chunks were just stored (status done, pages, chunks) in one
    transaction, keeping the uploaded PDFs so their pages can be shown; each one's outcome.

    With `must_exist`, a document deleted meanwhile loses its fresh chunks again and its outcome
    is IngestionError. The caller invalidates the tenant's answers afterwards.
    """
    # A concurrent delete, in this process or another, sees the records before or after this.
    with _documents_lock(deps, tenant_id):
        gone = deps.documents.record_indexed(
            tenant_id, [i.facts for i in indexed], must_exist=must_exist
        )
        outcomes: list[IndexOutcome] = []
        for i in indexed:
            document = i.document
            if document.document_id in gone:
                deps.corpus.delete_document(tenant_id, document.document_id)
                outcomes.append(
                    IngestionError(
                        "the document was deleted while it was being indexed; upload it again "
                        "if you still want it"
                    )
                )
                continue
            deps.originals.keep(
                tenant_id, document.document_id, document.source, i.upload, document.ocr.layouts
            )
            outcomes.append(document)
    return outcomes


def queue_local_file(deps: UploadDeps, tenant_id: str, path: Path) -> JobRecord:
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
    reservation = reserve_upload(deps, tenant_id)
    stored = deps.uploads_dir / f"{secrets.token_hex(16)}{suffix}"
    try:
        stored.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, stored)
    except BaseException:
        stored.unlink(missing_ok=True)
        release_upload(deps, tenant_id, reservation)
        raise
    received = ReceivedFile(stored, path.name, stored.stat().st_size)
    (job,) = submit_uploads(deps, tenant_id, [reservation], [received])
    return job


def ingest_local_file(
    deps: DocumentDeps, tenant_id: str, path: Path, progress: ProgressCallback | None = None
) -> IngestedDocument:
    """Index a local file synchronously (the CLI path); its file name is the document source."""
    from app.services.users import validate_tenant_id

    validate_tenant_id(tenant_id)
    return index_document(deps, tenant_id, path, sanitise_filename(path.name), progress)


@dataclass(frozen=True)
class ListedPage(Generic[Listed]):
    """One page of a tenant's documents or jobs, newest first, and how many it has in all (of
    the statuses asked, for jobs)."""

    records: list[Listed]
    total: int


def list_documents(
    deps: DocumentDeps,
    tenant_id: str,
    limit: int,
    offset: int,
    collections: Collection[str] | None = None,
) -> ListedPage[DocumentRecord]:
    """One page of the tenant's documents (of these collections, when given) and their count."""
    return ListedPage(
        deps.documents.list(tenant_id, limit, offset, collections),
        deps.documents.count(tenant_id, collections),
    )


def get_document(deps: DocumentDeps, tenant_id: str, document_id: str) -> DocumentRecord:
    """The tenant's document; NotFound whether missing or another tenant's."""
    record = deps.documents.get(tenant_id, document_id)
    if record is None:
        raise NotFound("document not found")
    return record


def delete_document(
    deps: DocumentDeps, tenant_id: str, document_id: str, uploader: Uploader | None = None
) -> None:
    """Remove a document's chunks and record; no search or answer reaches it afterwards.

    NotFound when missing; Forbidden (nothing removed) when the uploader may not delete it.
    """
    with _documents_lock(deps, tenant_id):
        found = deps.documents.get(tenant_id, document_id)
        if found is None:
            raise NotFound("document not found")
        audit = None
        if uploader is not None:
            uploader.check_may_change(found, "delete")
            audit = uploader.actor.entry("document.deleted", document_id, source=found.source)
        removed = deps.corpus.delete_document(tenant_id, document_id)
        deps.documents.delete(tenant_id, document_id, audit)
        deps.originals.drop(tenant_id, document_id)
    deps.cache.invalidate_tenant(tenant_id)
    deps.refresh_keywords(tenant_id)
    log.info("document deleted", extra={"document_id": document_id, "chunks": removed})


def list_jobs(
    deps: UploadDeps,
    tenant_id: str,
    statuses: Sequence[JobStatus],
    limit: int,
    offset: int,
    collections: Collection[str] | None = None,
) -> ListedPage[JobRecord]:
    """The tenant's jobs in `statuses` (uploads still being received are not jobs yet), of
    documents in `collections` when given."""
    records, total = deps.jobs.page(tenant_id, statuses, limit, offset, collections)
    return ListedPage(records, total)


def get_job(deps: UploadDeps, tenant_id: str, job_id: str) -> JobRecord:
    """The tenant's job; NotFound whether missing, another tenant's, or an upload still being
    received (its id is not given out until the job exists)."""
    job = deps.jobs.get(tenant_id, job_id)
    if job is None or job.status == "reserved":
        raise NotFound("job not found")
    return job
