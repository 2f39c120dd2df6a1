"""Builders shared by the Chroma store tests: chunks of a document as ingestion would make them."""

from __future__ import annotations

from collections.abc import Sequence

from app.domain import Chunk, chunk_id, document_id
from app.providers.types import Embedder
from app.services.corpus import Corpus


def make_chunks(
    tenant: str, source: str, texts: Sequence[str], page: int = 1, label: str | None = None
) -> list[Chunk]:
    """Chunks of one page of one document, ids computed the way ingestion computes them."""
    doc = document_id(tenant, source)
    chunks, offset = [], 0
    for index, text in enumerate(texts):
        chunks.append(
            Chunk(
                id=chunk_id(tenant, doc, page, text),
                tenant_id=tenant,
                document_id=doc,
                source=source,
                page=page,
                page_label=label if label is not None else str(page),
                chunk_index=index,
                start=offset,
                end=offset + len(text),
                text=text,
            )
        )
        offset += len(text)
    return chunks


def ingest(
    store: Corpus, embedder: Embedder, tenant: str, source: str, texts: Sequence[str]
) -> list[Chunk]:
    """Embed and store `texts` as the whole of document `source`; returns its chunks."""
    chunks = make_chunks(tenant, source, texts)
    vectors = embedder.embed_documents([c.text for c in chunks])
    store.replace_document(tenant, document_id(tenant, source), chunks, vectors)
    return chunks
