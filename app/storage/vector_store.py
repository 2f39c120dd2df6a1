"""The vector store interface: per-tenant collections of chunks with precomputed vectors.

Callers embed (so ingestion can batch and report progress); the store persists and searches.
A Chroma persistent directory (embedded default) or a Chroma server implements it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from app.domain import Chunk


class VectorStore(Protocol):
    """Per-tenant chunk storage; every method takes the tenant explicitly."""

    def replace_document(
        self,
        tenant_id: str,
        document_id: str,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]],
    ) -> None:
        """Upsert these chunks; afterwards no other chunk of the document survives."""
        ...

    def replace_documents(
        self,
        tenant_id: str,
        documents: Sequence[tuple[str, Sequence[Chunk], Sequence[Sequence[float]]]],
    ) -> None:
        """`replace_document` for each (document id, chunks, vectors), in as few writes as the
        backend can (ingestion of many small files batches them here)."""
        ...

    def delete_document(self, tenant_id: str, document_id: str) -> int:
        """Remove every chunk of a document; returns how many were removed."""
        ...

    def query(self, tenant_id: str, vector: Sequence[float], k: int) -> list[tuple[Chunk, float]]:
        """The k nearest chunks by cosine similarity (higher is closer), best first."""
        ...

    def find_containing(self, tenant_id: str, text: str, limit: int) -> list[Chunk]:
        """Chunks whose text contains `text` exactly (case-sensitive), up to `limit`."""
        ...

    def get_chunks(self, tenant_id: str, ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids that belong to the tenant, in the given order."""
        ...

    def iter_chunks(self, tenant_id: str) -> Iterator[Chunk]:
        """Every chunk of the tenant (for building its keyword index)."""
        ...

    def chunk_ids(self, tenant_id: str) -> list[str]:
        """The ids of every chunk of the tenant, without their texts (cheap to list)."""
        ...

    def count(self, tenant_id: str) -> int:
        """Number of chunks the tenant has."""
        ...

    def corpus_version(self, tenant_id: str) -> int:
        """A counter that changes whenever the tenant's chunks change (for indexes, caches)."""
        ...
