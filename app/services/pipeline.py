"""The ingestion pipeline below the job layer: file -> pages -> chunks -> vectors -> store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from app.domain import Chunk, document_id
from app.ingestion import LoadLimits, chunk_pages, load_with_timeout
from app.providers.types import Embedder
from app.storage.vector_store import VectorStore

# (done, total, stage): pages parsed, then chunks embedded, so a client can draw a bar.
ProgressCallback = Callable[[int, int, str], None]


@dataclass(frozen=True)
class PipelineConfig:
    """Plain values the pipeline needs, taken from Settings by the caller."""

    chunk_size: int
    chunk_overlap: int
    limits: LoadLimits
    parse_timeout_s: float
    batch_size: int


@dataclass(frozen=True)
class IngestedDocument:
    """What one file became."""

    document_id: str
    source: str
    pages: int
    chunks: int


def _ignore_progress(done: int, total: int, stage: str) -> None:
    return None


def index_file(
    path: Path,
    *,
    tenant_id: str,
    source: str,
    embedder: Embedder,
    store: VectorStore,
    config: PipelineConfig,
    progress: ProgressCallback | None = None,
) -> IngestedDocument:
    """Parse, chunk, embed and store one file; the stored document replaces any older version."""
    progress = progress or _ignore_progress
    pages = load_with_timeout(path, config.limits, config.parse_timeout_s)
    progress(len(pages), len(pages), "parsed")
    doc_id = document_id(tenant_id, source)
    chunks = chunk_pages(
        pages,
        tenant_id=tenant_id,
        document_id=doc_id,
        source=source,
        chunk_size=config.chunk_size,
        chunk_overlap=config.chunk_overlap,
    )
    batches = embedded_batches(chunks, embedder, config.batch_size, progress)
    store.replace_document(tenant_id, doc_id, batches)
    return IngestedDocument(doc_id, source, len(pages), len(chunks))


def embedded_batches(
    chunks: list[Chunk], embedder: Embedder, batch_size: int, progress: ProgressCallback
) -> Iterator[tuple[list[Chunk], list[list[float]]]]:
    """Chunk batches with their vectors, embedded one batch ahead on a helper thread.

    While the consumer (the store) writes batch k, batch k+1 is being embedded, so the write
    costs no wall time on a machine with a spare core. Progress is reported as batches are
    handed over. If the consumer stops early, at most one batch of embedding is wasted.
    """
    batches = [chunks[start : start + batch_size] for start in range(0, len(chunks), batch_size)]
    progress(0, len(chunks), "embedding")

    def embed(batch: list[Chunk]) -> list[list[float]]:
        return embedder.embed_documents([chunk.text for chunk in batch])

    done = 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed") as pool:
        ahead: Future[list[list[float]]] | None = (
            pool.submit(embed, batches[0]) if batches else None
        )
        for index, batch in enumerate(batches):
            assert ahead is not None
            vectors = ahead.result()
            following = index + 1
            ahead = pool.submit(embed, batches[following]) if following < len(batches) else None
            done += len(batch)
            progress(done, len(chunks), "embedding")
            yield batch, vectors
