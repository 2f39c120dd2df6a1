"""The vector index interface: per-tenant nearest-neighbour search over precomputed vectors.

An index holds vectors only, keyed by chunk id, with the document id deletes filter on. The
chunk records and the tenant's corpus version live in the service database (`ChunkStore`); the
corpus service (`app.services.blocks.corpus`) writes both, in the order that keeps the rows the
truth.
Every backend passes the shared conformance suite (tests/storage/test_vector_index_conformance.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class IndexedVector:
    """One chunk's vector and the document it belongs to."""

    chunk_id: str
    document_id: str
    vector: Sequence[float]


class VectorIndex(Protocol):
    """Per-tenant vectors; every method takes the tenant explicitly."""

    def upsert(self, tenant_id: str, vectors: Sequence[IndexedVector]) -> None:
        """Add or overwrite vectors by chunk id (writing an id again leaves one copy)."""
        ...

    def delete(
        self, tenant_id: str, *, chunk_ids: Sequence[str] = (), document_id: str | None = None
    ) -> int:
        """Remove the tenant's vectors with these ids and, given a document, every vector of
        it; returns how many were removed."""
        ...

    def query(
        self,
        tenant_id: str,
        vector: Sequence[float],
        k: int,
        documents: Collection[str] | None = None,
    ) -> list[tuple[str, float]]:
        """Chunk ids of the tenant's k nearest vectors with their cosine similarity (higher is
        closer), best first; only vectors of these documents when given (a filter inside the
        search, never applied to its results: k come back when the documents hold k)."""
        ...

    def nearest_among(
        self, tenant_id: str, vector: Sequence[float], k: int, chunk_ids: Sequence[str]
    ) -> list[tuple[str, float]]:
        """The k nearest of these chunks' vectors, compared exactly (every one of them), best
        first: a small search scope's dense arm, where a filtered approximate search loses
        recall."""
        ...

    def count(self, tenant_id: str) -> int:
        """Number of vectors the tenant has."""
        ...

    def rebuild(self, tenant_id: str, pages: Iterable[Sequence[IndexedVector]]) -> bool:
        """If the tenant's vectors were made by another embedding model, or from another form of
        the text (`app.text.arabic.EMBEDDED_TEXT_FORM`), replace them all with `pages` (the old
        ones are dropped only once every page is written); returns False, reading no page, when
        they are already the current model's, made from the current form."""
        ...
