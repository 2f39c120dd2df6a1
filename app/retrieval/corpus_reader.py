"""What retrieval reads of a tenant's corpus; `app.services.blocks.corpus.Corpus` provides it.

Declared here, by its reader, so retrieval depends on no service: the dense arm asks for nearest
chunks, exact matching scans texts, the keyword index lists and reads chunks and watches the
corpus version.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Protocol

from app.domain import Chunk


class NearestReader(Protocol):
    """Nearest chunks by a dense arm's vectors: the first arm's (`CorpusReader`) or a further
    arm's (`app.retrieval.extra_dense.ExtraDenseReader`)."""

    def query(
        self,
        *,
        tenant_id: str,
        vector: Sequence[float],
        k: int,
        documents: Collection[str] | None = None,
        chunk_ids: Sequence[str] | None = None,
    ) -> list[tuple[Chunk, float]]:
        """The k nearest chunks by cosine similarity (higher is closer), best first; only among
        these documents' chunks (the index's filter), or exactly among these chunks."""
        ...


class TextReader(Protocol):
    """Substring scans and chunk reads: what exact matching reads."""

    def find_containing(
        self,
        *,
        tenant_id: str,
        text: str,
        limit: int,
        documents: Collection[str] | None = None,
        chunk_ids: Collection[str] | None = None,
    ) -> list[Chunk]:
        """Chunks whose text contains `text` exactly (case-sensitive), up to `limit`; only
        among these documents and these chunks when given."""
        ...

    def get_chunks(self, *, tenant_id: str, ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids that belong to the tenant, in the given order."""
        ...


class CorpusReader(NearestReader, TextReader, Protocol):
    """Tenant-scoped reads of chunks and their vectors."""

    def chunk_owners(self, tenant_id: str) -> list[tuple[str, str, int]]:
        """(chunk id, document id, page) of every chunk of the tenant."""
        ...

    def iter_chunks(self, tenant_id: str) -> Iterator[Chunk]:
        """Every chunk of the tenant (for building its keyword index)."""
        ...

    def chunk_ids(self, tenant_id: str) -> list[str]:
        """The ids of every chunk of the tenant, without their texts."""
        ...

    def corpus_version(self, tenant_id: str) -> int:
        """A counter that changes whenever the tenant's chunks change."""
        ...
