"""The tenant's indexed corpus: chunk records in SQL, their vectors in a vector index.

This is the one place that writes both, so every backend gets the same write order and failure
handling:

- replace: vectors first, then the rows in one transaction that bumps the corpus version, then
  the vectors of chunks the document no longer has. A chunk exists once its row does: if the
  vector write fails nothing changed; if the rows' transaction fails the new vectors have no row
  and are never returned (uploading again completes the write, ids are stable); if the last
  delete fails the leftover vectors have no row either, and deleting the document removes them.
- delete: every vector of the document first, then the rows (bumping the version): with the
  vector store unreachable (a server restarting) nothing changed and the delete can be
  retried, instead of a listed document whose chunks are gone.
- reindex: re-embeds the tenant's rows into the index when its vectors are another model's, and
  bumps the version once they are all written.

With a second dense arm (RAG_SECOND_EMBEDDING, `app.services.blocks.second_arm`), every write and
delete goes to its index too, at the same point as the first's; reindex fills it when it is
incomplete. The English arm (RAG_ENGLISH_EMBEDDING) is the same kind of arm over the chunks of
English documents only (the language `document_language` tells from a document's first chunks,
the one its record keeps): a document written in another language has its English vectors
removed, and completeness counts the chunks of the documents recorded English.

A nearest-neighbour hit is returned only with its row, read under the asking tenant: another
tenant's chunk can never come back, even if a bug put its vector in this tenant's index.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TYPE_CHECKING

from app.domain import Chunk, indexed_text
from app.providers.types import Embedder
from app.retrieval.extra_dense import ExtraDense
from app.services.blocks.second_arm import SecondArm
from app.storage.chunks import PAGE_SIZE, ChunkStore
from app.storage.second_index import EnglishVectorIndex
from app.storage.vector_index import IndexedVector, VectorIndex
from app.text.language import document_language

if TYPE_CHECKING:
    from app.config import Settings
    from app.storage.second_index import SecondVectorIndex

log = logging.getLogger(__name__)

ENGLISH = "en"  # the recorded language the English arm holds
DocumentContent = tuple[str, Sequence[Chunk], Sequence[Sequence[float]]]


class NearestReads:
    """Nearest chunks in `index`, each returned with its row from `chunks`, read under the asking
    tenant: the first arm's (`Corpus`) and a further arm's (`ArmReads`)."""

    chunks: ChunkStore
    index: VectorIndex

    def query(
        self,
        *,
        tenant_id: str,
        vector: Sequence[float],
        k: int,
        documents: Collection[str] | None = None,
        chunk_ids: Sequence[str] | None = None,
    ) -> list[tuple[Chunk, float]]:
        """The k nearest chunks by cosine similarity (higher is closer), best first; among
        these documents' chunks (the index's filter) or exactly among these chunks. A further
        arm is asked after `ready`, which this does not repeat."""
        if chunk_ids is not None:
            hits = self.index.nearest_among(tenant_id, vector, k, chunk_ids)
        else:
            hits = self.index.query(tenant_id, vector, k, documents)
        similarity = dict(hits)
        chunks = self.chunks.get(tenant_id, [cid for cid, _ in hits])
        if len(chunks) != len(hits):
            log.warning(
                "nearest neighbours without a chunk row were skipped (an interrupted write or a "
                "foreign vector)",
                extra={"tenant_id": tenant_id, "skipped": len(hits) - len(chunks)},
            )
        return [(chunk, similarity[chunk.id]) for chunk in chunks]


class Corpus(NearestReads):
    """Writes and reads a tenant's chunks through the chunk rows and the vector index."""

    def __init__(
        self,
        chunks: ChunkStore,
        index: VectorIndex,
        embedder: Embedder,
        embed_section_paths: bool = True,
        second: SecondArm | None = None,
        english: SecondArm | None = None,
    ) -> None:
        self.chunks = chunks
        self.index = index
        self.second = second
        self.english = english
        self._embedder = embedder
        self._embed_section_paths = embed_section_paths  # as the ingestion pipeline embeds
        # Serialises this process's writes, so a reindex never interleaves with an upload.
        self._write_lock = threading.RLock()
        # The further arms as the retriever reads them (None: the option is off).
        self.second_dense = self._extra_dense("second", second, index.count)
        self.english_dense = self._extra_dense("english", english, self._english_count)

    def _extra_dense(
        self, stage: str, arm: SecondArm | None, first_count: Callable[[str], int]
    ) -> ExtraDense | None:
        """The arm as the retriever reads it: its question embedder and `ArmReads`."""
        if arm is None:
            return None
        return ExtraDense(stage, arm.embedder, ArmReads(self.chunks, arm, first_count))

    # --- writes ---

    def replace_documents(
        self,
        *,
        tenant_id: str,
        documents: Sequence[DocumentContent],
        second_vectors: Sequence[Sequence[Sequence[float]]] | None = None,
        english_vectors: Sequence[Sequence[Sequence[float]]] | None = None,
    ) -> None:
        """Make each (document id, chunks, vectors) the document's whole content (no other chunk
        of it survives): one vector upsert, one transaction of rows (ingestion of many small
        files batches them here).

        With a second dense arm, `second_vectors` are its vectors of each document (from
        `embed_second`, which ingestion times as a stage of its own); embedded here if not given.
        The English arm's likewise (`english_vectors`, from `embed_english`: none for a document
        in another language, whose English vectors, if it had any, are removed).
        """
        entries: list[IndexedVector] = []
        for document_id, chunks, vectors in documents:
            entries += _entries(tenant_id, document_id, chunks, vectors)
        second_entries: list[IndexedVector] = []
        if self.second is not None:
            if second_vectors is None:
                second_vectors = self.embed_second([chunks for _, chunks, _ in documents])
            for (document_id, chunks, _), vectors in zip(documents, second_vectors, strict=True):
                second_entries += _entries(tenant_id, document_id, chunks, vectors)
        english_entries: list[IndexedVector] = []
        not_english: list[str] = []
        if self.english is not None:
            if english_vectors is None:
                english_vectors = self.embed_english([chunks for _, chunks, _ in documents])
            for (document_id, chunks, _), vectors in zip(documents, english_vectors, strict=True):
                if vectors:
                    english_entries += _entries(tenant_id, document_id, chunks, vectors)
                else:
                    not_english.append(document_id)
        with self._write_lock:
            if self.english is not None:
                self.english.write(
                    tenant_id=tenant_id,
                    entries=english_entries,
                    tenant_is_empty=lambda: not self.chunks.ids(tenant_id),
                )
                for document_id in not_english:  # it may have been English before
                    self.english.index.delete(tenant_id, document_id=document_id)
            if self.second is not None:
                self.second.write(
                    tenant_id=tenant_id,
                    entries=second_entries,
                    tenant_is_empty=lambda: not self.chunks.ids(tenant_id),
                )
            self.index.upsert(tenant_id, entries)
            obsolete = self.chunks.write_documents(
                tenant_id, {document_id: chunks for document_id, chunks, _ in documents}
            )
            if obsolete:
                self.index.delete(tenant_id, chunk_ids=obsolete)
                if self.second is not None:
                    self.second.index.delete(tenant_id, chunk_ids=obsolete)
                if self.english is not None:
                    self.english.index.delete(tenant_id, chunk_ids=obsolete)

    def embed_second(self, documents: Sequence[Sequence[Chunk]]) -> list[list[list[float]]]:
        """The second dense arm's vectors of each document's chunks ([] without the arm)."""
        if self.second is None:
            return []
        return _embed_each(self.second, documents, [True] * len(documents))

    def embed_english(self, documents: Sequence[Sequence[Chunk]]) -> list[list[list[float]]]:
        """The English arm's vectors of each document's chunks: none for a document whose
        language is not English ([] without the arm)."""
        if self.english is None:
            return []
        english = [
            document_language([chunk.text for chunk in chunks]) == "en" for chunks in documents
        ]
        return _embed_each(self.english, documents, english)

    def delete_document(self, *, tenant_id: str, document_id: str) -> int:
        """Remove every chunk of a document; returns how many were removed."""
        with self._write_lock:
            self.index.delete(tenant_id, document_id=document_id)  # vectors first (module doc)
            if self.second is not None:
                self.second.index.delete(tenant_id, document_id=document_id)
            if self.english is not None:
                self.english.index.delete(tenant_id, document_id=document_id)
            return self.chunks.delete_document(tenant_id, document_id)

    def reindex(self, tenant_id: str) -> int:
        """Re-embed the tenant's chunks with the configured model if its vectors are another
        model's or were made from text with its Arabic vowel marks still in; returns how many
        were re-embedded (0 when none needed it). An interrupted run can simply be repeated: the
        old vectors go only once the new ones are all written."""
        embedded = 0

        def pages() -> Iterator[list[IndexedVector]]:
            nonlocal embedded
            for page in _pages(self.chunks.iter_tenant(tenant_id)):
                vectors = self._embedder.embed_documents(
                    [indexed_text(chunk, self._embed_section_paths) for chunk in page]
                )
                embedded += len(page)
                yield _entries(tenant_id, None, page, vectors)

        with self._write_lock:
            if not self.index.rebuild(tenant_id, pages()):
                return 0
            self.chunks.bump_version(tenant_id)
        return embedded

    def fill_second(self, tenant_id: str) -> int:
        """Embed every chunk of the tenant with the second dense arm unless its collection
        already holds them all; returns how many were embedded. The version is bumped after,
        so every process starts searching the arm on its next query."""
        if self.second is None:
            return 0
        with self._write_lock:
            chunks = self.chunks.iter_tenant(tenant_id)
            return self._fill(self.second, tenant_id, chunks, self.index.count(tenant_id))

    def fill_english(self, tenant_id: str) -> int:
        """Embed every chunk of the tenant's English documents (by their records) with the
        English arm unless its collection already holds them all; returns how many were
        embedded. The version is bumped after, as by `fill_second`."""
        if self.english is None:
            return 0
        with self._write_lock:
            english = self.chunks.documents_in_language(tenant_id, ENGLISH)
            chunks = (c for c in self.chunks.iter_tenant(tenant_id) if c.document_id in english)
            return self._fill(self.english, tenant_id, chunks, self._english_count(tenant_id))

    def _fill(
        self, arm: SecondArm, tenant_id: str, chunks: Iterator[Chunk], first_count: int
    ) -> int:
        """Fill the arm's collection with these chunks unless it already holds `first_count`
        of them, bumping the version when it embedded any (under the write lock)."""
        filled = arm.fill(tenant_id=tenant_id, pages=_pages(chunks), first_count=first_count)
        if filled:
            self.chunks.bump_version(tenant_id)
        return filled

    # --- reads ---

    def _english_count(self, tenant_id: str) -> int:
        """How many chunks the tenant's documents recorded English have."""
        return self.chunks.count_in_language(tenant_id, ENGLISH)

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
        among these documents and chunks when given."""
        return self.chunks.find_containing(tenant_id, text, limit, documents, chunk_ids)

    def chunk_owners(self, tenant_id: str) -> list[tuple[str, str, int]]:
        """(chunk id, document id, page) of every chunk of the tenant."""
        return self.chunks.owners(tenant_id)

    def get_chunks(self, *, tenant_id: str, ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids that belong to the tenant, in the given order."""
        return self.chunks.get(tenant_id, ids)

    def iter_chunks(self, tenant_id: str) -> Iterator[Chunk]:
        """Every chunk of the tenant, page by page (for building its keyword index)."""
        return self.chunks.iter_tenant(tenant_id)

    def chunk_ids(self, tenant_id: str) -> list[str]:
        """The ids of every chunk of the tenant, without their texts (cheap to list)."""
        return self.chunks.ids(tenant_id)

    def count(self, tenant_id: str) -> int:
        """Number of chunk vectors the tenant has (asks the index, so it proves it answers)."""
        return self.index.count(tenant_id)

    def corpus_version(self, tenant_id: str) -> int:
        """Changes on every write or delete, in this process or another one."""
        return self.chunks.version(tenant_id)


def _entries(
    tenant_id: str,
    document_id: str | None,
    chunks: Sequence[Chunk],
    vectors: Sequence[Sequence[float]],
) -> list[IndexedVector]:
    """The index entries of chunks of one document (any of the tenant's, given None)."""
    if len(chunks) != len(vectors):
        raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
    entries = []
    for chunk, vector in zip(chunks, vectors, strict=True):
        other_document = document_id is not None and chunk.document_id != document_id
        if chunk.tenant_id != tenant_id or other_document:
            raise ValueError(f"chunk {chunk.id} does not belong to {tenant_id}/{document_id}")
        entries.append(IndexedVector(chunk.id, chunk.document_id, vector))
    return entries


def _pages(chunks: Iterator[Chunk]) -> Iterator[list[Chunk]]:
    page: list[Chunk] = []
    for chunk in chunks:
        page.append(chunk)
        if len(page) == PAGE_SIZE:
            yield page
            page = []
    if page:
        yield page


def _embed_each(
    arm: SecondArm, documents: Sequence[Sequence[Chunk]], held: Sequence[bool]
) -> list[list[list[float]]]:
    """The arm's vectors of each document's chunks, embedded in one call: none for a document
    the arm does not hold (`held`, one flag a document)."""
    flat = arm.embed(
        [chunk for chunks, kept in zip(documents, held, strict=True) if kept for chunk in chunks]
    )
    out, start = [], 0
    for chunks, kept in zip(documents, held, strict=True):
        size = len(chunks) if kept else 0
        out.append(flat[start : start + size])
        start += size
    return out


class ArmReads(NearestReads):
    """A further dense arm's reads (the second, the English) as retrieval asks them
    (`app.retrieval.extra_dense.ExtraDenseReader`): its nearest chunks (`query`), and its
    completeness is counted against `first_count` (every chunk of the tenant for the second
    arm, the chunks of its English documents for the English arm)."""

    def __init__(self, rows: ChunkStore, arm: SecondArm, first_count: Callable[[str], int]) -> None:
        self.chunks = rows
        self.index = arm.index
        self._arm = arm
        self._first_count = first_count

    def ready(self, tenant_id: str) -> bool:
        """Whether the tenant's collection holds every chunk it should."""
        return self._arm.ready(
            tenant_id=tenant_id,
            version=self.chunks.version(tenant_id),
            first_count=lambda: self._first_count(tenant_id),
        )

    def held(self, *, tenant_id: str, chunk_ids: Sequence[str]) -> set[str]:
        """Which of these chunks the arm's collection holds (the English arm: those of English
        documents)."""
        return self._arm.index.held(tenant_id, chunk_ids)


def build_second_arm(
    settings: Settings, after_eviction: Callable[[], None] | None = None
) -> SecondArm | None:
    """The second dense arm RAG_SECOND_EMBEDDING names (its model loaded), or None."""
    from app.providers.embeddings import build_second_embedder
    from app.storage.second_index import SecondVectorIndex

    return _extra_arm(settings, build_second_embedder(settings), SecondVectorIndex, after_eviction)


def build_english_arm(
    settings: Settings, after_eviction: Callable[[], None] | None = None
) -> SecondArm | None:
    """The English arm RAG_ENGLISH_EMBEDDING names (its model loaded), or None."""
    from app.providers.embeddings import build_english_embedder

    return _extra_arm(
        settings, build_english_embedder(settings), EnglishVectorIndex, after_eviction
    )


def _extra_arm(
    settings: Settings,
    embedder: Embedder | None,
    kind: type[SecondVectorIndex],
    after_eviction: Callable[[], None] | None,
) -> SecondArm | None:
    """A dense arm beside the first: `embedder` (None: the option is off) and its per-tenant
    index of `kind`."""
    from app.storage.chroma_index import build_vector_index

    if embedder is None:
        return None
    index = build_vector_index(
        settings, embedder.model_id, embedder.dimension, after_eviction, kind=kind
    )
    assert isinstance(index, kind)
    return SecondArm(embedder, index, embed_section_paths=settings.section_paths_in("dense"))
