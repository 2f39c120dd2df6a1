"""A corpus and a file indexed into it without the job layer or the document table: what the
retrieval and storage tests, the evaluation harness and the benchmarks build on.

The service indexes through `app.services.indexing` (which records the document too); these
call the same building blocks in the same order: parse, check the chunk quota, embed, store.
"""

from __future__ import annotations

from pathlib import Path

from app.config import Settings
from app.providers.types import Embedder
from app.services.blocks.corpus import Corpus, build_second_arm
from app.services.blocks.pipeline import (
    FileProgress,
    IngestedDocument,
    PipelineConfig,
    ProgressCallback,
    check_chunk_quota,
    embed_files,
    embed_second,
    job_stage,
    parse_file,
)
from app.storage.chroma_index import build_vector_index
from app.storage.chunks import ChunkStore
from app.storage.db import Database, database_from_settings


def build_corpus(
    settings: Settings, embedder: Embedder, database: Database | None = None
) -> Corpus:
    """The configured vector index for `embedder`'s vectors, with chunk rows in `database` (by
    default the service database the settings name), and the second dense arm if configured."""
    chunks = ChunkStore(database or database_from_settings(settings))
    return Corpus(
        chunks,
        build_vector_index(settings, embedder.model_id, embedder.dimension),
        embedder,
        embed_section_paths=settings.section_paths_in("dense"),
        second=build_second_arm(settings),
    )


def index_file(
    path: Path,
    *,
    tenant_id: str,
    source: str,
    embedder: Embedder,
    corpus: Corpus,
    config: PipelineConfig,
    progress: ProgressCallback | None = None,
    max_chunks: int | None = None,
    ocr_pages_allowed: int | None = None,
) -> IngestedDocument:
    """Parse, chunk, embed and store one file; the stored document replaces any older version.

    With `max_chunks` (the tenant's remaining chunk quota), a document that would have more
    chunks raises QuotaExceeded before anything is embedded or stored.
    """
    parsed = parse_file(
        path,
        tenant_id=tenant_id,
        source=source,
        config=config,
        progress=progress,
        ocr_pages_allowed=ocr_pages_allowed,
    )
    check_chunk_quota(parsed, max_chunks)

    def embedded(reports: list[FileProgress]) -> None:
        for report in reports:
            if progress is not None:
                progress(report.done, report.total, "embedding")

    with job_stage("embed"):
        (vectors,) = embed_files(
            [parsed.chunks], embedder, config.batch_size, embedded, config.embed_section_paths
        )
    second = embed_second(corpus, [parsed.chunks])
    with job_stage("store"):
        corpus.replace_documents(
            tenant_id=tenant_id,
            documents=[(parsed.document_id, parsed.chunks, vectors)],
            second_vectors=second,
        )
    return IngestedDocument(
        parsed.document_id, source, parsed.pages, len(parsed.chunks), parsed.ocr
    )
