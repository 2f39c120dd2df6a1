"""Indexing a tenant's stored files: parse, check the quotas, embed together, store and record."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from app.domain import GENERAL_COLLECTION
from app.domain import document_id as make_document_id
from app.errors import IngestionError
from app.ingestion.parse_turn import ParseTurn
from app.services.blocks.pipeline import (
    EmbeddingProgress,
    FileProgress,
    IngestedDocument,
    ParsedFile,
    PipelineConfig,
    ProgressCallback,
    check_chunk_quota,
    embed_english,
    embed_files,
    embed_second,
    job_stage,
    parse_file,
)
from app.services.pages import KeptOriginals
from app.storage.documents import DocumentStore, IndexedFacts
from app.text.language import LANGUAGE_CHUNKS, document_language

if TYPE_CHECKING:
    from app.providers.types import Embedder
    from app.services.blocks.corpus import Corpus
    from app.services.webhooks import DocumentEvents
    from app.storage.cache import AnswerCache

log = logging.getLogger(__name__)

DELETED_WHILE_INDEXING = (
    "the document was deleted while it was being indexed; upload it again if you still want it"
)


@dataclass(frozen=True)
class DocumentDeps:
    """What indexing, listing and deleting a tenant's documents needs, built by the container."""

    documents: DocumentStore
    corpus: Corpus
    embedder: Embedder
    cache: AnswerCache
    refresh_keywords: Callable[[str], None]  # rebuilds a tenant's keyword index
    # A lock held across processes by name (the database's), see `documents_lock`.
    named_lock: Callable[[str], AbstractContextManager[None]]
    originals: KeptOriginals
    pipeline: PipelineConfig
    chunk_quota: int  # RAG_QUOTA_CHUNKS
    ocr_page_quota: int | None = None  # RAG_QUOTA_OCR_PAGES (None: no quota)
    events: DocumentEvents | None = None  # webhooks hear of deletions


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def documents_lock(deps: DocumentDeps, *, tenant_id: str) -> AbstractContextManager[None]:
    """Serialises "delete a document" with "record freshly indexed ones" across the API and
    worker processes, so an upload finishing during a delete cannot bring the document back.
    One lock per tenant, so a batch's documents are recorded together under one lock."""
    return deps.named_lock(f"documents:{tenant_id}")


@dataclass(frozen=True)
class IndexRequest:
    """One stored file to index for a tenant under its document name (`source`)."""

    path: Path
    source: str
    progress: ProgressCallback | None = None  # parse progress and embedding progress
    sha256: str | None = None  # of the file, when the caller already hashed it
    turn: ParseTurn | None = None  # a queued job's deadline and OCR turns
    document_id: str | None = None  # a queued job's document (None: the name's in `general`)

    def document_of(self, tenant_id: str) -> str:
        """The id of the document this file is indexed as."""
        return self.document_id or make_document_id(tenant_id, self.source)


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
    *,
    tenant_id: str,
    requests: list[IndexRequest],
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
    *,
    tenant_id: str,
    path: Path,
    source: str,
    progress: ProgressCallback | None = None,
) -> IngestedDocument:
    """Index one stored file for a tenant into its `general` collection and record it
    (`index_documents` for one file); raises what made it fail."""
    doc_id = deps.documents.identify(tenant_id, GENERAL_COLLECTION, source)
    requests = [IndexRequest(path, source, progress, document_id=doc_id)]
    (outcome,) = index_documents(deps, tenant_id=tenant_id, requests=requests)
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def _distinct_documents(tenant_id: str, requests: list[IndexRequest]) -> list[list[IndexRequest]]:
    """Split into consecutive runs without a repeated document, so a re-upload of the same
    name in one batch still replaces the earlier version in order."""
    segments: list[list[IndexRequest]] = [[]]
    seen: set[str] = set()
    for request in requests:
        doc_id = request.document_of(tenant_id)
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
        if must_exist:  # a file deleted meanwhile stops the embedding here, not at its end
            _check_not_deleted(
                deps, tenant_id, [ready[r.file] for r in reports if 0 < r.done < r.total]
            )
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
        english = embed_english(deps.corpus, [p.parsed.chunks for p in ready])
        with job_stage("store"):
            deps.corpus.replace_documents(
                tenant_id=tenant_id,
                documents=[
                    (p.parsed.document_id, p.parsed.chunks, v)
                    for p, v in zip(ready, vectors, strict=True)
                ],
                second_vectors=second,
                english_vectors=english,
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


def _check_not_deleted(deps: DocumentDeps, tenant_id: str, embedding: list[_Parsed]) -> None:
    """IngestionError when a file whose embedding is under way (more calls to come) was deleted
    since it was parsed: a long file stops within one embedding call of its deletion. One read
    per such file and call; a file embedded in one call is never checked here (its record says
    at the end)."""
    for item in embedding:
        if deps.documents.get(tenant_id, item.parsed.document_id) is None:
            raise IngestionError(DELETED_WHILE_INDEXING)


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
    doc_id = request.document_of(tenant_id)
    record = deps.documents.get(tenant_id, doc_id)
    if must_exist and record is None:
        raise IngestionError("the document was deleted before it could be indexed")
    sha = request.sha256 or file_sha256(request.path)
    old = _Replaced(record.chunks, record.ocr_pages) if record is not None else _Replaced(0, 0)
    parsed = parse_file(
        request.path,
        tenant_id=tenant_id,
        source=request.source,
        document_id=doc_id,
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
            document_language([chunk.text for chunk in file.chunks[:LANGUAGE_CHUNKS]]),
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
    with documents_lock(deps, tenant_id=tenant_id):
        gone = deps.documents.record_indexed(
            tenant_id, [i.facts for i in indexed], must_exist=must_exist
        )
        outcomes: list[IndexOutcome] = []
        for i in indexed:
            document = i.document
            if document.document_id in gone:
                deps.corpus.delete_document(tenant_id=tenant_id, document_id=document.document_id)
                outcomes.append(IngestionError(DELETED_WHILE_INDEXING))
                continue
            deps.originals.keep(
                tenant_id=tenant_id,
                document_id=document.document_id,
                source=document.source,
                path=i.upload,
                ocr_layouts=document.ocr.layouts,
            )
            outcomes.append(document)
    return outcomes
