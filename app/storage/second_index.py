"""The second dense arm's vectors (RAG_SECOND_EMBEDDING): a Chroma collection per tenant beside
the first arm's, named with its own prefix so that neither index takes the other's collection
for one of another model.

A tenant indexed before the second arm was switched on has chunks its second collection lacks;
searching that collection would rank only the chunks written since. So the collection records
whether it holds every chunk of the tenant (`complete`): true when it was created for a tenant
without chunks, or once `fill` has written them all (`python -m app.cli reindex`). The reader
skips the arm until then. The record is read fresh, not from a cached handle, because another
process (the CLI) may have filled the collection.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from app.storage.chroma_index import ChromaVectorIndex
from app.storage.vector_index import IndexedVector
from app.text.arabic import EMBEDDED_TEXT_FORM

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection


SECOND_PREFIX = "rag2"
COMPLETE = "complete"


class SecondVectorIndex(ChromaVectorIndex):
    """Per-tenant vectors of the second dense arm, with a record of their completeness."""

    prefix = SECOND_PREFIX

    def exists(self, tenant_id: str) -> bool:
        """Whether the tenant has a collection of this arm (complete or not)."""
        return self._collection(tenant_id, create=False) is not None

    def start(self, tenant_id: str, complete: bool) -> None:
        """Create the tenant's collection, recording whether it holds every chunk (true only
        for a tenant that has none yet)."""
        collection = self._collection(tenant_id, create=True)
        assert collection is not None
        _record(collection, complete)

    def held(self, tenant_id: str, chunk_ids: Sequence[str]) -> set[str]:
        """Which of these chunks have a vector here (the English arm's: those of English
        documents)."""
        collection = self._collection(tenant_id, create=False)
        if collection is None or not chunk_ids:
            return set()
        return set(collection.get(ids=list(chunk_ids), include=[])["ids"])

    def is_complete(self, tenant_id: str) -> bool:
        """Whether the collection holds every chunk, embedded from the current text form."""
        collection = self._get(self.collection_name(tenant_id))
        metadata = {} if collection is None else (collection.metadata or {})
        return (
            metadata.get(COMPLETE) is True and metadata.get("embedded_text") == EMBEDDED_TEXT_FORM
        )

    def fill(self, tenant_id: str, pages: Iterable[Sequence[IndexedVector]]) -> None:
        """Write every chunk's vector (`pages`) into the tenant's collection, then record it
        complete. Written in place (a process holding the collection keeps a valid handle);
        another model's collections of this arm are dropped first. Vectors of chunks deleted
        meanwhile have no row and are never returned."""
        for name in self._stale_collections(tenant_id):
            self.client.delete_collection(name)
        self._collections.pop(tenant_id)
        self._only_current.discard(tenant_id)
        collection = self._collection(tenant_id, create=True)
        assert collection is not None
        _record(collection, False)  # an interrupted fill stays incomplete
        self._write_pages(collection, tenant_id, pages)
        # The current text form too: a collection made before vowel-mark stripping is refilled.
        _record(collection, True, embedded_text=EMBEDDED_TEXT_FORM)


def _record(collection: Collection, complete: bool, **extra: str) -> None:
    metadata = dict(collection.metadata or {})
    if metadata.get(COMPLETE) is complete and all(metadata.get(k) == v for k, v in extra.items()):
        return
    collection.modify(metadata={**metadata, **extra, COMPLETE: complete})


ENGLISH_PREFIX = "raen"


class EnglishVectorIndex(SecondVectorIndex):
    """Per-tenant vectors of the English arm (RAG_ENGLISH_EMBEDDING): only the chunks of the
    tenant's English documents, with the same record of completeness."""

    prefix = ENGLISH_PREFIX
