"""The second dense arm's side of the corpus (RAG_SECOND_EMBEDDING): its embedder and per-tenant
index, written with the first arm's vectors by `app.services.blocks.corpus.Corpus`. The English
arm (RAG_ENGLISH_EMBEDDING) is one too, over the chunks of English documents only: the count its
completeness is checked against is theirs (`first_count` below), not the first arm's.

Measured after vowel stripping (docs/evaluation.md, eval/two_dense_arms.py): USE and e5 fused win
on XQuAD across scripts and ARCD, lose on hadith and Qur'an ar->en, and cost ~8x the ingest time,
hence an option, off by default.

A tenant's second collection is searched only while it holds every chunk: recorded complete
(`app.storage.second_index`) and with no fewer vectors than the first arm's (a process without
the option may have written chunks to the tenant since). Switched on for a tenant indexed
without it, the arm starts collecting new chunks but stays out of retrieval until
`python -m app.cli reindex` fills it. This is read once per corpus version, so a fill by another
process (which bumps the version) is seen on the next query.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

from app import tracing
from app.domain import Chunk, indexed_text
from app.providers.types import Embedder
from app.storage.second_index import SecondVectorIndex
from app.storage.vector_index import IndexedVector


class SecondArm:
    """The second embedder and its index; `ready` caches completeness per corpus version."""

    def __init__(
        self, embedder: Embedder, index: SecondVectorIndex, embed_section_paths: bool = True
    ) -> None:
        self.embedder = embedder
        self.index = index
        self._embed_section_paths = embed_section_paths  # as the first arm embeds
        self._ready: dict[str, tuple[int, bool]] = {}
        self._ready_lock = threading.Lock()

    @property
    def model_id(self) -> str:
        """The second embedder's model id."""
        return self.embedder.model_id

    def embed(self, chunks: Sequence[Chunk]) -> list[list[float]]:
        """The second arm's passage vectors of these chunks, in order."""
        texts = [indexed_text(chunk, self._embed_section_paths) for chunk in chunks]
        with tracing.span("embedding.second_documents", embedding__texts=len(texts)):
            return self.embedder.embed_documents(texts)

    def write(
        self,
        *,
        tenant_id: str,
        entries: Sequence[IndexedVector],
        tenant_is_empty: Callable[[], bool],
    ) -> None:
        """Upsert vectors; a tenant's first write creates its collection, complete only when
        the tenant has no chunk yet (`tenant_is_empty`, asked then and only then)."""
        if not self.index.exists(tenant_id):
            self.index.start(tenant_id, complete=tenant_is_empty())
        self.index.upsert(tenant_id, entries)

    def covers(self, *, tenant_id: str, first_count: int) -> bool:
        """Whether the collection holds every chunk: recorded complete, and with at least as many
        vectors as the first arm's (`first_count`; fewer when a process without the option
        wrote to the tenant)."""
        return self.index.is_complete(tenant_id) and self.index.count(tenant_id) >= first_count

    def fill(self, *, tenant_id: str, pages: Iterable[Sequence[Chunk]], first_count: int) -> int:
        """Embed and write every chunk of the tenant unless its collection covers them all;
        returns how many were embedded (0 when none needed it)."""
        if self.covers(tenant_id=tenant_id, first_count=first_count):
            return 0
        embedded = 0

        def vectors() -> Iterable[list[IndexedVector]]:
            nonlocal embedded
            for page in pages:
                embedded += len(page)
                yield [
                    IndexedVector(chunk.id, chunk.document_id, vector)
                    for chunk, vector in zip(page, self.embed(page), strict=True)
                ]

        self.index.fill(tenant_id, vectors())
        return embedded

    def ready(self, *, tenant_id: str, version: int, first_count: Callable[[], int]) -> bool:
        """Whether the tenant's collection may be searched: it covers every chunk at this corpus
        version (`first_count` is asked only when the version changed)."""
        with self._ready_lock:
            known = self._ready.get(tenant_id)
        if known is not None and known[0] == version:
            return known[1]
        complete = self.covers(tenant_id=tenant_id, first_count=first_count())
        with self._ready_lock:
            self._ready[tenant_id] = (version, complete)
        return complete
