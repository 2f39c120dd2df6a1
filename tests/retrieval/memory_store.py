"""A tiny in-memory `VectorStore` (brute-force cosine) for fast unit tests of retrieval.

It follows the Protocol's contract, including a corpus version bumped on every write, and counts
how often the keyword index reads the whole tenant (`iterations`) and how many chunk texts
were read (`chunks_read`). Integration tests run the
same retrieval code against real Chroma.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np

from app.domain import Chunk, chunk_id, document_id
from app.providers.types import Embedder


class InMemoryVectorStore:
    """Per-tenant dicts of chunk id -> (chunk, unit vector)."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, tuple[Chunk, np.ndarray]]] = {}
        self._versions: Counter[str] = Counter()
        self.iterations: Counter[str] = Counter()
        self.chunks_read: Counter[str] = Counter()  # texts handed out by get/iter_chunks
        # Writes are atomic to readers, as in a real store (no half-replaced document visible).
        self._lock = threading.Lock()

    def replace_document(
        self,
        tenant_id: str,
        document_id: str,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]],
    ) -> None:
        with self._lock:
            rows = dict(self._data.get(tenant_id, {}))
            for cid in [cid for cid, (c, _) in rows.items() if c.document_id == document_id]:
                del rows[cid]
            for chunk, vector in zip(chunks, vectors, strict=True):
                assert chunk.tenant_id == tenant_id
                v = np.asarray(vector, dtype=np.float64)
                rows[chunk.id] = (chunk, v / (np.linalg.norm(v) or 1.0))
            self._data[tenant_id] = rows
            self._versions[tenant_id] += 1

    def replace_documents(
        self,
        tenant_id: str,
        documents: Sequence[tuple[str, Sequence[Chunk], Sequence[Sequence[float]]]],
    ) -> None:
        for document, chunks, vectors in documents:
            self.replace_document(tenant_id, document, chunks, vectors)

    def delete_document(self, tenant_id: str, document_id: str) -> int:
        rows = self._data.get(tenant_id, {})
        doomed = [cid for cid, (c, _) in rows.items() if c.document_id == document_id]
        for cid in doomed:
            del rows[cid]
        if doomed:
            self._versions[tenant_id] += 1
        return len(doomed)

    def query(self, tenant_id: str, vector: Sequence[float], k: int) -> list[tuple[Chunk, float]]:
        q = np.asarray(vector, dtype=np.float64)
        q = q / (np.linalg.norm(q) or 1.0)
        scored = [(c, float(v @ q)) for c, v in self._data.get(tenant_id, {}).values()]
        scored.sort(key=lambda pair: -pair[1])
        return scored[:k]

    def find_containing(self, tenant_id: str, text: str, limit: int) -> list[Chunk]:
        rows = self._data.get(tenant_id, {}).values()
        return [c for c, _ in rows if text and text in c.text][:limit]

    def get_chunks(self, tenant_id: str, ids: Sequence[str]) -> list[Chunk]:
        rows = self._data.get(tenant_id, {})
        found = [rows[cid][0] for cid in dict.fromkeys(ids) if cid in rows]
        self.chunks_read[tenant_id] += len(found)
        return found

    def iter_chunks(self, tenant_id: str) -> Iterator[Chunk]:
        self.iterations[tenant_id] += 1
        with self._lock:
            rows = list(self._data.get(tenant_id, {}).values())
        for chunk, _ in rows:
            self.chunks_read[tenant_id] += 1
            yield chunk

    def chunk_ids(self, tenant_id: str) -> list[str]:
        with self._lock:
            return list(self._data.get(tenant_id, {}))

    def count(self, tenant_id: str) -> int:
        return len(self._data.get(tenant_id, {}))

    def corpus_version(self, tenant_id: str) -> int:
        return self._versions[tenant_id]


def add_document(
    store: InMemoryVectorStore | object,
    embedder: Embedder,
    tenant: str,
    source: str,
    texts: Sequence[str],
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
    store.replace_document(tenant, doc, chunks, vectors)  # type: ignore[attr-defined]
    return chunks
