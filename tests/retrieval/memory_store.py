"""A tiny in-memory `VectorIndex` (brute-force cosine) for fast unit tests of retrieval.

It passes the same conformance suite as Chroma (tests/storage/test_vector_index_conformance.py).
`memory_corpus` puts it behind the real corpus service with chunk rows in SQLite, and
`CountingChunkStore` counts how often the keyword index reads the whole tenant (`iterations`)
and how many chunk texts were read (`chunks_read`). Integration tests run the same retrieval
code against real Chroma.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from app.domain import Chunk, chunk_id, document_id
from app.providers.types import Embedder
from app.services.blocks.corpus import Corpus
from app.storage.chunks import ChunkStore
from app.storage.db import open_database
from app.storage.vector_index import IndexedVector


class InMemoryVectorIndex:
    """Per-tenant dicts of chunk id -> (document id, unit vector)."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self._data: dict[str, dict[str, tuple[str, np.ndarray]]] = {}
        self._lock = threading.Lock()

    def _tenant(self, tenant_id: str) -> dict[str, tuple[str, np.ndarray]]:
        if not tenant_id or not tenant_id.strip():
            raise ValueError("tenant_id must be a non-empty string")
        return self._data.setdefault(tenant_id, {})

    def _unit(self, vector: Sequence[float]) -> np.ndarray:
        if len(vector) != self.dimension:
            raise ValueError(f"vector of length {len(vector)}, expected {self.dimension}")
        v = np.asarray(vector, dtype=np.float64)
        return v / (np.linalg.norm(v) or 1.0)

    def upsert(self, tenant_id: str, vectors: Sequence[IndexedVector]) -> None:
        units = [(entry, self._unit(entry.vector)) for entry in vectors]
        with self._lock:
            rows = self._tenant(tenant_id)
            for entry, unit in units:
                rows[entry.chunk_id] = (entry.document_id, unit)

    def delete(
        self, tenant_id: str, *, chunk_ids: Sequence[str] = (), document_id: str | None = None
    ) -> int:
        with self._lock:
            rows = self._tenant(tenant_id)
            doomed = {cid for cid in chunk_ids if cid in rows}
            doomed |= {cid for cid, (doc, _) in rows.items() if doc == document_id}
            for cid in doomed:
                del rows[cid]
            return len(doomed)

    def query(
        self,
        tenant_id: str,
        vector: Sequence[float],
        k: int,
        documents: Collection[str] | None = None,
    ) -> list[tuple[str, float]]:
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        q = self._unit(vector)
        with self._lock:
            scored = [
                (cid, float(v @ q))
                for cid, (doc, v) in self._tenant(tenant_id).items()
                if documents is None or doc in documents
            ]
        scored.sort(key=lambda pair: (-pair[1], pair[0]))
        return scored[:k]

    def nearest_among(
        self, tenant_id: str, vector: Sequence[float], k: int, chunk_ids: Sequence[str]
    ) -> list[tuple[str, float]]:
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        q = self._unit(vector)
        with self._lock:
            rows = self._tenant(tenant_id)
            scored = [(cid, float(rows[cid][1] @ q)) for cid in set(chunk_ids) if cid in rows]
        scored.sort(key=lambda pair: (-pair[1], pair[0]))
        return scored[:k]

    def count(self, tenant_id: str) -> int:
        return len(self._tenant(tenant_id))

    def rebuild(self, tenant_id: str, pages: Iterable[Sequence[IndexedVector]]) -> bool:
        return False  # one model's vectors only: there is never anything to rebuild


class CountingChunkStore(ChunkStore):
    """Chunk rows that count whole-tenant reads and chunk texts handed out."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.iterations: Counter[str] = Counter()
        self.chunks_read: Counter[str] = Counter()

    def get(self, tenant_id: str, chunk_ids: Iterable[str]) -> list[Chunk]:
        found = super().get(tenant_id, chunk_ids)
        self.chunks_read[tenant_id] += len(found)
        return found

    def iter_tenant(self, tenant_id: str) -> Iterator[Chunk]:
        self.iterations[tenant_id] += 1
        for chunk in super().iter_tenant(tenant_id):
            self.chunks_read[tenant_id] += 1
            yield chunk


def memory_corpus(
    directory: Path, embedder: Embedder, rows: type[ChunkStore] = ChunkStore
) -> Corpus:
    """The corpus service over an in-memory index, its rows in a SQLite file in `directory`."""
    database = open_database(f"sqlite:///{directory / 'chunks.db'}")
    return Corpus(rows(database), InMemoryVectorIndex(embedder.dimension), embedder)


def add_document(
    store: Corpus, embedder: Embedder, tenant: str, source: str, texts: Sequence[str]
) -> list[Chunk]:
    """Chunk ids as ingestion makes them; one page per text (page = position + 1)."""
    doc = document_id(tenant, source)
    chunks = [
        Chunk(
            id=chunk_id(tenant, doc, i + 1, text),
            tenant_id=tenant,
            document_id=doc,
            source=source,
            page=i + 1,
            page_label=str(i + 1),
            chunk_index=0,
            start=0,
            end=len(text),
            text=text,
        )
        for i, text in enumerate(texts)
    ]
    vectors = embedder.embed_documents([c.text for c in chunks])
    store.replace_documents(tenant_id=tenant, documents=[(doc, chunks, vectors)])
    return chunks
