"""What part of a tenant's corpus one search may see, applied inside every arm.

A `SearchScope` names the documents (and, with a page filter, the chunks) a caller may read and
asked for. It is never applied to results: the dense arm searches only the scope (a metadata
filter, or an exact search over the scope's vectors when it is small), the keyword arm scores
only the scope's chunks before its cut, and exact-match forcing looks only inside it. So a
scoped search returns k results when the scope holds k, and its scores, counts and timings are
those of the scope alone.

`ChunkOwners` maps each chunk of a tenant to its document and page, read once per corpus
version; `ScopeMasks` turns a scope into a boolean mask over a keyword snapshot's chunks.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from app.memory import HotMap

if TYPE_CHECKING:
    from app.domain import Chunk
    from app.retrieval.corpus_reader import CorpusReader, NearestReader
    from app.retrieval.keyword import KeywordSnapshot


@dataclass(frozen=True)
class SearchScope:
    """The documents a search may see (None: every document of the tenant) and, narrower
    still, the chunks (None: every chunk of those documents). `key` names the scope in cache
    keys: two callers with the same key get the same retrieval."""

    documents: frozenset[str] | None = None
    chunks: frozenset[str] | None = None
    key: str = "all"

    @property
    def unrestricted(self) -> bool:
        """Whether the scope is the whole tenant."""
        return self.documents is None and self.chunks is None

    @property
    def empty(self) -> bool:
        """Whether the scope holds nothing (a search then finds nothing, never everything)."""
        return (self.documents is not None and not self.documents) or (
            self.chunks is not None and not self.chunks
        )

    def allows(self, document_id: str, chunk_id: str | None = None) -> bool:
        """Whether a chunk (or, without one, a document) is inside the scope."""
        if self.documents is not None and document_id not in self.documents:
            return False
        return self.chunks is None or chunk_id is None or chunk_id in self.chunks


EVERYTHING = SearchScope()


def scope_key(parts: Iterable[str]) -> str:
    """A short stable digest of what decides a scope (collections, canonical filters)."""
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()
    return digest[:32]


@dataclass(frozen=True)
class ChunkOwners:
    """Each chunk of a tenant at one corpus version: its document and page."""

    version: int
    chunk_ids: tuple[str, ...]
    document_ids: tuple[str, ...]
    # position of each chunk -> index into document_ids, and its page
    document_of: np.ndarray
    page_of: np.ndarray

    @classmethod
    def build(cls, version: int, rows: Iterable[tuple[str, str, int]]) -> ChunkOwners:
        """From (chunk id, document id, page) rows."""
        chunk_ids: list[str] = []
        documents: dict[str, int] = {}
        document_of: list[int] = []
        pages: list[int] = []
        for chunk_id, document_id, page in rows:
            chunk_ids.append(chunk_id)
            document_of.append(documents.setdefault(document_id, len(documents)))
            pages.append(page)
        return cls(
            version,
            tuple(chunk_ids),
            tuple(documents),
            np.asarray(document_of, dtype=np.int64),
            np.asarray(pages, dtype=np.int64),
        )

    def mask(self, scope: SearchScope) -> np.ndarray:
        """A boolean per chunk (in `chunk_ids` order): inside the scope."""
        if scope.chunks is not None:
            inside = np.fromiter(
                (cid in scope.chunks for cid in self.chunk_ids),
                dtype=bool,
                count=len(self.chunk_ids),
            )
        else:
            inside = np.ones(len(self.chunk_ids), dtype=bool)
        if scope.documents is not None:
            allowed = np.fromiter(
                (d in scope.documents for d in self.document_ids),
                dtype=bool,
                count=len(self.document_ids),
            )
            inside &= allowed[self.document_of]
        return inside


class ScopeMasks:
    """Masks of scopes over keyword snapshots: a snapshot's chunks aligned once to the owners
    of its corpus version, then each scope costs one vectorised lookup."""

    def __init__(self, hot_tenants: int = 64) -> None:
        self._aligned: HotMap[str, tuple[tuple[str, ...], ChunkOwners, np.ndarray]] = HotMap(
            hot_tenants
        )
        self._lock = threading.Lock()

    def mask(
        self, tenant_id: str, snapshot_ids: tuple[str, ...], owners: ChunkOwners, scope: SearchScope
    ) -> np.ndarray:
        """A boolean per snapshot chunk: inside the scope (a chunk the owners do not know, one
        deleted since the snapshot was read, is outside)."""
        position = self._positions(tenant_id, snapshot_ids, owners)
        inside = np.append(owners.mask(scope), False)  # index -1 -> the appended False
        masked: np.ndarray = inside[position]
        return masked

    def _positions(
        self, tenant_id: str, snapshot_ids: tuple[str, ...], owners: ChunkOwners
    ) -> np.ndarray:
        cached = self._aligned.get(tenant_id)
        if cached is not None and cached[0] is snapshot_ids and cached[1] is owners:
            return cached[2]
        with self._lock:
            where = {cid: i for i, cid in enumerate(owners.chunk_ids)}
            position = np.fromiter(
                (where.get(cid, -1) for cid in snapshot_ids),
                dtype=np.int64,
                count=len(snapshot_ids),
            )
            self._aligned.put(tenant_id, (snapshot_ids, owners, position))
            return position


@dataclass(frozen=True)
class DenseFilter:
    """Where a dense arm looks: exactly among `chunk_ids`, or through the vector index's
    filter on `documents` (neither: the whole tenant)."""

    documents: frozenset[str] | None = None
    chunk_ids: list[str] | None = None

    def nearest(
        self, reader: NearestReader, *, tenant_id: str, vector: Sequence[float], k: int
    ) -> list[tuple[Chunk, float]]:
        """The reader's k nearest chunks where this filter looks, best first."""
        return reader.query(
            tenant_id=tenant_id,
            vector=vector,
            k=k,
            documents=self.documents,
            chunk_ids=self.chunk_ids,
        )


class ScopedReads:
    """The reads of a scoped search: nearest chunks inside the scope and a keyword snapshot
    that scores only the scope (exact matching is given the scope: `find_exact`)."""

    def __init__(self, store: CorpusReader, exact_scope_chunks: int, hot_tenants: int = 64) -> None:
        self.store = store
        self.exact_scope_chunks = exact_scope_chunks
        self._owners: HotMap[str, ChunkOwners] = HotMap(hot_tenants)
        self._masks = ScopeMasks(hot_tenants)

    def owners(self, tenant_id: str) -> ChunkOwners:
        """The tenant's chunk owners at its current corpus version (read again once it moved)."""
        version = self.store.corpus_version(tenant_id)
        cached = self._owners.get(tenant_id)
        if cached is not None and cached.version == version:
            return cached
        owners = ChunkOwners.build(version, self.store.chunk_owners(tenant_id))
        self._owners.put(tenant_id, owners)
        return owners

    def dense_filter(self, tenant_id: str, scope: SearchScope) -> DenseFilter | None:
        """How a dense arm (either) searches inside the scope: every vector of a small scope
        (or of a page-level one) compared exactly, a large one through the index's filter;
        None when the scope holds nothing."""
        if scope.unrestricted:
            return DenseFilter()
        if scope.empty:
            return None
        owners = self.owners(tenant_id)
        inside = owners.mask(scope)
        size = int(np.count_nonzero(inside))
        if size == 0:
            return None
        if scope.chunks is not None or size <= self.exact_scope_chunks:
            chunk_ids = [owners.chunk_ids[i] for i in np.flatnonzero(inside).tolist()]
            return DenseFilter(chunk_ids=chunk_ids)
        return DenseFilter(documents=scope.documents)

    def nearest(
        self, tenant_id: str, vector: list[float], k: int, scope: SearchScope
    ) -> list[tuple[Chunk, float]]:
        """The k nearest chunks inside the scope, best first (`dense_filter`)."""
        where = self.dense_filter(tenant_id, scope)
        if where is None:
            return []
        return where.nearest(self.store, tenant_id=tenant_id, vector=vector, k=k)

    def keyword_snapshot(
        self, tenant_id: str, snapshot: KeywordSnapshot, scope: SearchScope
    ) -> KeywordSnapshot:
        """The snapshot as the scope sees it (itself when the scope is the whole tenant)."""
        if scope.unrestricted:
            return snapshot
        mask = self._masks.mask(tenant_id, snapshot.chunk_ids, self.owners(tenant_id), scope)
        return snapshot.scoped(mask)
