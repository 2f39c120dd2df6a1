"""The ingestion pipeline below the job layer: file -> pages -> chunks -> vectors -> corpus."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from app import tracing
from app.domain import Chunk, OcrLayout, Page, indexed_text
from app.domain import document_id as make_document_id
from app.errors import QuotaExceeded
from app.ingestion import LoadLimits, chunk_pages, load_with_timeout
from app.ingestion.ocr_result import is_unreadable, ocr_warnings
from app.ingestion.parse_turn import ParseTurn
from app.metrics import job_stage_timer
from app.providers.types import Embedder

if TYPE_CHECKING:
    from app.config import Settings
    from app.services.blocks.corpus import Corpus

# (done, total, stage): pages OCR'd (stage "ocr", only for scans and images), pages parsed, then
# chunks embedded, so a client can draw a bar.
ProgressCallback = Callable[[int, int, str], None]


@dataclass(frozen=True)
class FileProgress:
    """Chunks embedded so far (`done` of `total`) of the file at index `file` of a batch."""

    file: int
    done: int
    total: int


# The files an embedding call of several files touched, after each call.
EmbeddingProgress = Callable[[list[FileProgress]], None]


@dataclass(frozen=True)
class PipelineConfig:
    """Plain values the pipeline needs (`from_settings` reads them from Settings)."""

    chunk_size: int
    chunk_overlap: int
    limits: LoadLimits
    parse_timeout_s: float
    batch_size: int
    # Mark chunks with their section path (always, so every hit can show its breadcrumb);
    # RAG_SECTION_PATHS decides only which arms index the path, so embed it with the text only
    # when the dense arm does. RAG_SECTION_CHUNKS: start a chunk at each section start.
    section_paths: bool = True
    embed_section_paths: bool = False
    section_chunks: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> PipelineConfig:
        """The ingestion values of a Settings object."""
        return cls(
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
            limits=LoadLimits.from_settings(settings),
            parse_timeout_s=settings.parse_timeout_s,
            batch_size=settings.embedding_batch_size,
            embed_section_paths=settings.section_paths_in("dense"),
            section_chunks=settings.section_chunks,
        )


@dataclass(frozen=True)
class OcrOutcome:
    """What OCR did to a document: the layouts of the pages it read (page number -> words and
    boxes, kept to highlight citations) and one warning per page it could not read."""

    layouts: dict[int, OcrLayout] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def pages(self) -> int:
        """Pages OCR was run on (read or not): what the tenant's OCR quota counts."""
        return len(self.layouts) + len(self.warnings)


def ocr_outcome(pages: list[Page]) -> OcrOutcome:
    """The OCR layouts and warnings among a loader's pages."""
    layouts = {
        page.number: page.ocr for page in pages if page.ocr is not None and not is_unreadable(page)
    }
    return OcrOutcome(layouts, tuple(ocr_warnings(pages)))


@dataclass(frozen=True)
class IngestedDocument:
    """What one file became."""

    document_id: str
    source: str
    pages: int
    chunks: int
    ocr: OcrOutcome = field(default_factory=OcrOutcome)


def _ignore_progress(done: int, total: int, stage: str) -> None:
    return None


@dataclass(frozen=True)
class ParsedFile:
    """A file parsed and chunked, not yet embedded or stored."""

    document_id: str
    source: str
    pages: int
    chunks: list[Chunk]
    ocr: OcrOutcome = field(default_factory=OcrOutcome)


@contextmanager
def job_stage(stage: str) -> Iterator[None]:
    """One stage of an ingestion job (parse, embed, embed_second, embed_english, store): timed
    for metrics, and a span."""
    with job_stage_timer(stage), tracing.span(f"job.{stage}", stage=stage):
        yield


def parse_file(
    path: Path,
    *,
    tenant_id: str,
    source: str,
    config: PipelineConfig,
    progress: ProgressCallback | None = None,
    ocr_pages_allowed: int | None = None,
    turn: ParseTurn | None = None,
    document_id: str | None = None,
) -> ParsedFile:
    """Parse and chunk one file (the per-file part of ingestion, before embedding).

    `ocr_pages_allowed` is what the tenant's OCR page quota leaves (None: no quota); a file with
    more pages to OCR fails before any is read. `turn` is the queued job's (its deadline, its
    OCR checkpoint, when it yields: see `load_with_timeout`). `document_id` is the document it
    becomes (None: the one of this name in the `general` collection).
    """
    with job_stage("parse"):
        return _parse_file(
            path,
            tenant_id,
            source,
            config,
            progress or _ignore_progress,
            ocr_pages_allowed,
            turn,
            document_id or make_document_id(tenant_id, source),
        )


def _parse_file(
    path: Path,
    tenant_id: str,
    source: str,
    config: PipelineConfig,
    progress: ProgressCallback,
    ocr_pages_allowed: int | None,
    turn: ParseTurn | None,
    doc_id: str,
) -> ParsedFile:
    limits = config.limits
    if ocr_pages_allowed is not None:
        limits = replace(limits, ocr=replace(limits.ocr, pages_allowed=max(ocr_pages_allowed, 0)))
    loaded = load_with_timeout(
        path,
        limits,
        config.parse_timeout_s,
        lambda done, total: progress(done, total, "ocr"),
        turn,
    )
    outcome = ocr_outcome(loaded)
    pages = [page for page in loaded if not is_unreadable(page)]
    progress(len(pages), len(pages), "parsed")
    chunks = chunk_pages(
        pages,
        tenant_id=tenant_id,
        document_id=doc_id,
        source=source,
        chunk_size=config.chunk_size,
        chunk_overlap=config.chunk_overlap,
        section_paths=config.section_paths,
        section_chunks=config.section_chunks,
    )
    return ParsedFile(doc_id, source, len(pages), chunks, outcome)


def check_chunk_quota(parsed: ParsedFile, max_chunks: int | None) -> None:
    """QuotaExceeded when the document has more chunks than the tenant's quota leaves it."""
    if max_chunks is not None and len(parsed.chunks) > max_chunks:
        raise QuotaExceeded(
            "chunks",
            f"tenant quota exceeded: chunks (this document has {len(parsed.chunks)} chunks, "
            f"{max_chunks} remain within the quota); delete documents to make room",
        )


def embed_second(
    corpus: Corpus, files: Sequence[Sequence[Chunk]]
) -> list[list[list[float]]] | None:
    """The second dense arm's vectors of each file's chunks (RAG_SECOND_EMBEDDING), timed as
    the stage `embed_second`; None when the arm is off."""
    if corpus.second is None:
        return None
    with job_stage("embed_second"):
        return corpus.embed_second(files)


def embed_english(
    corpus: Corpus, files: Sequence[Sequence[Chunk]]
) -> list[list[list[float]]] | None:
    """The English arm's vectors of each file's chunks (RAG_ENGLISH_EMBEDDING; none for a file
    not in English), timed as the stage `embed_english`; None when the arm is off."""
    if corpus.english is None:
        return None
    with job_stage("embed_english"):
        return corpus.embed_english(files)


def embed_files(
    files: Sequence[Sequence[Chunk]],
    embedder: Embedder,
    batch_size: int,
    progress: EmbeddingProgress,
    with_paths: bool = True,
) -> list[list[list[float]]]:
    """Embed several files' chunks (with their section paths unless told not to) in full
    batches that cross file boundaries; each file's vectors, in order.

    After each embedding call `progress` gets the progress of every file the call touched
    (first all files at 0).
    """
    texts = [
        (owner, indexed_text(c, with_paths)) for owner, chunks in enumerate(files) for c in chunks
    ]
    vectors: list[list[list[float]]] = [[] for _ in files]
    progress([FileProgress(owner, 0, len(chunks)) for owner, chunks in enumerate(files)])
    for start in range(0, len(texts), batch_size):
        part = texts[start : start + batch_size]
        with tracing.span("embedding.documents", embedding__texts=len(part)):
            embedded = embedder.embed_documents([text for _, text in part])
        for (owner, _), vector in zip(part, embedded, strict=True):
            vectors[owner].append(vector)
        touched = sorted({owner for owner, _ in part})
        progress([FileProgress(o, len(vectors[o]), len(files[o])) for o in touched])
    return vectors
