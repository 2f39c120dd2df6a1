"""Chroma implementation of `VectorStore`: one collection per tenant and embedding model.

We call chromadb directly rather than through langchain-chroma: its `Chroma` class always embeds
texts itself (no way to upsert precomputed vectors) and exposes neither collection-metadata updates
nor deletes by metadata filter, which the per-tenant versioning and document replacement need.

A collection is named from a hash of the tenant id and a hash of (embedding model id, dimension,
storage layout), so vectors of two models never share a collection; a tenant whose collection was
built with another model, or by an older layout, is refused until `reindex_tenant` has rebuilt
it. Distance is cosine, set explicitly; every chunk read back is checked for its tenant.

Chroma holds each chunk's vector and location metadata; its text lives in the service database
(`ChunkTextStore`, see that module for the measured reason). A text is written before its vector
and deleted after it, so a vector without a text only exists after a crash mid-write; such a
chunk is skipped on read (and logged) until the document is written again.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from app.domain import Chunk
from app.errors import EmbeddingModelMismatch
from app.storage.chunk_texts import ChunkTextStore
from app.storage.db import Database, database_from_settings

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

    from app.config import Settings
    from app.providers.types import Embedder

COLLECTION_PREFIX = "rag"
PAGE_SIZE = 1000
# Part of every collection name: layout 2 keeps chunk texts out of Chroma. A collection of the
# earlier layout (texts stored as Chroma documents) is refused until reindexed.
STORAGE_LAYOUT = 2
CORE_METADATA = (
    "tenant_id",
    "document_id",
    "source",
    "page",
    "page_label",
    "chunk_index",
    "start",
    "end",
)


log = logging.getLogger(__name__)


def _short_hash(text: str, length: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def tenant_prefix(tenant_id: str) -> str:
    """The part of a collection name that identifies the tenant."""
    return f"{COLLECTION_PREFIX}_{_short_hash(tenant_id, 20)}_"


def collection_name(tenant_id: str, model_id: str, dimension: int) -> str:
    """Collection of one tenant for one embedding model and dimension."""
    return tenant_prefix(tenant_id) + _short_hash(
        f"{model_id}\x00{dimension}\x00{STORAGE_LAYOUT}", 12
    )


def _chunk_metadata(chunk: Chunk) -> dict[str, str | int]:
    clash = set(chunk.metadata) & set(CORE_METADATA)
    if clash:
        raise ValueError(f"chunk metadata must not override core fields: {sorted(clash)}")
    core: dict[str, str | int] = {
        "tenant_id": chunk.tenant_id,
        "document_id": chunk.document_id,
        "source": chunk.source,
        "page": chunk.page,
        "page_label": chunk.page_label,
        "chunk_index": chunk.chunk_index,
        "start": chunk.start,
        "end": chunk.end,
    }
    return {**chunk.metadata, **core}


def _chunk_from_record(chunk_id: str, text: str, metadata: Mapping[str, Any]) -> Chunk:
    extra = {k: v for k, v in metadata.items() if k not in CORE_METADATA}
    return Chunk(
        id=chunk_id,
        tenant_id=str(metadata["tenant_id"]),
        document_id=str(metadata["document_id"]),
        source=str(metadata["source"]),
        page=int(metadata["page"]),
        page_label=str(metadata["page_label"]),
        chunk_index=int(metadata["chunk_index"]),
        start=int(metadata["start"]),
        end=int(metadata["end"]),
        text=text,
        metadata=extra,
    )


def _records(result: Mapping[str, Any], texts: Mapping[str, str]) -> list[Chunk]:
    """Chunks from a Chroma result and their texts; a record whose text is missing is skipped.

    Texts come from the service database; an old-layout collection (read only to reindex it)
    still carries them as Chroma documents.
    """
    ids = result["ids"]
    documents = result.get("documents") or [None] * len(ids)
    metadatas = result["metadatas"] or []
    chunks, missing = [], []
    for cid, document, meta in zip(ids, documents, metadatas, strict=True):
        text = texts.get(cid, document)
        if text is None:
            missing.append(cid)
            continue
        chunks.append(_chunk_from_record(cid, text, meta or {}))
    if missing:
        log.error(
            "chunks without a stored text were skipped (a write was interrupted; uploading the "
            "document again repairs it)",
            extra={"chunks": len(missing)},
        )
    return chunks


class ChromaVectorStore:
    """Per-tenant chunk storage in Chroma (persistent directory or server); see module doc."""

    def __init__(self, client: ClientAPI, embedder: Embedder, texts: ChunkTextStore) -> None:
        self._client = client
        self._embedder = embedder
        self._texts = texts
        self._model_id = embedder.model_id
        self._dimension = embedder.dimension
        self._collections: dict[str, Collection] = {}
        # Writes read-modify-write the corpus version; serialise them within the process.
        self._write_lock = threading.RLock()

    # --- collections ---

    def collection_name(self, tenant_id: str) -> str:
        """Name of the tenant's collection for the current embedding model."""
        _check_tenant(tenant_id)
        return collection_name(tenant_id, self._model_id, self._dimension)

    def _tenant_collections(self, tenant_id: str) -> list[str]:
        prefix = tenant_prefix(tenant_id)
        return [c.name for c in self._client.list_collections() if c.name.startswith(prefix)]

    def _stale_collections(self, tenant_id: str) -> list[str]:
        current = self.collection_name(tenant_id)
        return [name for name in self._tenant_collections(tenant_id) if name != current]

    def _create_collection(self, tenant_id: str) -> Collection:
        return self._client.get_or_create_collection(
            self.collection_name(tenant_id),
            embedding_function=None,  # we always supply vectors; never Chroma's default model
            configuration={"hnsw": {"space": "cosine"}},
            metadata={
                "tenant_id": tenant_id,
                "embedding_model_id": self._model_id,
                "dimension": self._dimension,
                "distance": "cosine",
                "storage_layout": STORAGE_LAYOUT,
                "corpus_version": 0,
            },
        )

    def _collection(self, tenant_id: str, create: bool) -> Collection | None:
        """The tenant's collection; refuses one built with another model (or a half reindex)."""
        cached = self._collections.get(tenant_id)
        if cached is not None:
            return cached
        name = self.collection_name(tenant_id)
        existing = self._tenant_collections(tenant_id)
        stale = [other for other in existing if other != name]
        if stale:
            old = self._client.get_collection(stale[0], embedding_function=None)
            old_model = (old.metadata or {}).get("embedding_model_id", "an unknown model")
            old_dimension = (old.metadata or {}).get("dimension", "?")
            reindex = f"`python -m app.cli reindex --tenant {tenant_id}`"
            if (old_model, old_dimension) == (self._model_id, self._dimension):
                raise EmbeddingModelMismatch(
                    f"tenant {tenant_id!r} was indexed by an earlier version of this service "
                    f"that stored chunk texts in Chroma; run {reindex} to move them"
                )
            raise EmbeddingModelMismatch(
                f"tenant {tenant_id!r} was indexed with embedding model {old_model} "
                f"(dimension {old_dimension}), but this service embeds with {self._model_id} "
                f"(dimension {self._dimension}); vectors of two models cannot be mixed. Run "
                f"{reindex} to re-embed its documents."
            )
        if name in existing:
            collection = self._client.get_collection(name, embedding_function=None)
        elif create:
            collection = self._create_collection(tenant_id)
        else:
            return None
        self._collections[tenant_id] = collection
        return collection

    def _bump_version(self, tenant_id: str, collection: Collection) -> None:
        # Re-read the metadata: another client may have written since we cached the collection.
        fresh = self._client.get_collection(collection.name, embedding_function=None)
        metadata = dict(fresh.metadata or {})
        previous = int(metadata.get("corpus_version", 0))
        # Nanosecond clock, never below previous + 1: strictly increasing here, and two writers
        # racing from separate processes still produce different versions.
        metadata["corpus_version"] = max(previous + 1, time.time_ns())
        collection.modify(metadata=metadata)

    # --- writes ---

    def replace_document(
        self,
        tenant_id: str,
        document_id: str,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]],
    ) -> None:
        """Upsert these chunks; afterwards no other chunk of the document survives."""
        if len(chunks) != len(vectors):
            raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        for chunk, vector in zip(chunks, vectors, strict=True):
            if chunk.tenant_id != tenant_id or chunk.document_id != document_id:
                raise ValueError(f"chunk {chunk.id} does not belong to {tenant_id}/{document_id}")
            if len(vector) != self._dimension:
                raise ValueError(
                    f"vector of length {len(vector)} for {self._model_id} "
                    f"(dimension {self._dimension})"
                )
        with self._write_lock:
            collection = self._collection(tenant_id, create=True)
            assert collection is not None
            self._texts.put(chunks)  # before the vectors: no vector is ever without its text
            self._upsert(collection, chunks, vectors)
            keep = {chunk.id for chunk in chunks}
            # Every stored vector has its text row, so the rows list the document's chunks.
            existing = self._texts.document_chunk_ids(tenant_id, document_id)
            obsolete = [cid for cid in existing if cid not in keep]
            if obsolete:
                collection.delete(ids=obsolete)
                self._texts.delete(tenant_id, obsolete)
            self._bump_version(tenant_id, collection)

    def _upsert(
        self, collection: Collection, chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]]
    ) -> None:
        step = min(PAGE_SIZE, self._client.get_max_batch_size())
        for begin in range(0, len(chunks), step):
            part = chunks[begin : begin + step]
            collection.upsert(
                ids=[chunk.id for chunk in part],
                embeddings=np.asarray(vectors[begin : begin + step], dtype=np.float32),
                metadatas=[_chunk_metadata(chunk) for chunk in part],  # type: ignore[misc]
            )

    def delete_document(self, tenant_id: str, document_id: str) -> int:
        """Remove every chunk of a document; returns how many were removed."""
        with self._write_lock:
            collection = self._collection(tenant_id, create=False)
            if collection is None:
                return 0
            ids = collection.get(where=_document_filter(tenant_id, document_id), include=[])["ids"]
            if ids:
                collection.delete(ids=ids)
                self._bump_version(tenant_id, collection)
            self._texts.delete_document(tenant_id, document_id)  # after the vectors
            return len(ids)

    def drop_tenant(self, tenant_id: str) -> None:
        """Remove the tenant's collections (of every embedding model) entirely."""
        with self._write_lock:
            self._collections.pop(tenant_id, None)
            for name in self._tenant_collections(tenant_id):
                self._client.delete_collection(name)
            self._texts.drop_tenant(tenant_id)

    def reindex_tenant(self, tenant_id: str) -> int:
        """Re-embed the tenant's chunks from older-model collections into the current one.

        Returns how many chunks were re-embedded. The old collection is dropped only after the
        new one holds every chunk, so an interrupted run can simply be repeated. A collection of
        the earlier storage layout is rebuilt the same way, its texts moved to the database.
        """
        with self._write_lock:
            self._collections.pop(tenant_id, None)
            stale = self._stale_collections(tenant_id)
            if not stale:
                return 0
            target = self._create_collection(tenant_id)
            total = 0
            for old_name in stale:
                old = self._client.get_collection(old_name, embedding_function=None)
                for page in self._pages(old, tenant_id, with_documents=True):
                    vectors = self._embedder.embed_documents([chunk.text for chunk in page])
                    self._texts.put(page)
                    self._upsert(target, page, vectors)
                    total += len(page)
            self._bump_version(tenant_id, target)
            for old_name in stale:
                self._client.delete_collection(old_name)
            self._collections[tenant_id] = target
            return total

    # --- reads ---

    def query(self, tenant_id: str, vector: Sequence[float], k: int) -> list[tuple[Chunk, float]]:
        """The k nearest chunks by cosine similarity (1 - cosine distance), best first."""
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        if len(vector) != self._dimension:
            raise ValueError(f"query vector of length {len(vector)}, expected {self._dimension}")
        collection = self._collection(tenant_id, create=False)
        if collection is None:
            return []
        result = collection.query(
            query_embeddings=np.asarray([vector], dtype=np.float32),
            n_results=k,
            # No `where` here: a metadata filter makes Chroma's HNSW query ~10x slower (74 vs
            # 6.6 ms at 10k chunks). The collection is the tenant's own; every result's tenant
            # is still verified below, so a foreign chunk can never be returned.
            include=["metadatas", "distances"],  # type: ignore[list-item]
        )
        ids = result["ids"][0]
        distances = dict(zip(ids, (result["distances"] or [[]])[0], strict=True))
        page = {"ids": ids, "metadatas": (result["metadatas"] or [[]])[0]}
        chunks = _own(_records(page, self._texts.get(tenant_id, ids)), tenant_id)
        return [(chunk, 1.0 - float(distances[chunk.id])) for chunk in chunks]

    def find_containing(self, tenant_id: str, text: str, limit: int) -> list[Chunk]:
        """Chunks whose text contains `text` exactly (case-sensitive), up to `limit`."""
        if not text or limit <= 0:
            return []
        return self.get_chunks(tenant_id, self._texts.find_containing(tenant_id, text, limit))

    def get_chunks(self, tenant_id: str, ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids that belong to the tenant, in the given order."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return []
        collection = self._collection(tenant_id, create=False)
        if collection is None:
            return []
        # By id without a metadata filter (40 ms -> 1 ms at 10k); the tenant is verified below.
        result = collection.get(ids=wanted, include=["metadatas"])  # type: ignore[list-item]
        chunks = _records(result, self._texts.get(tenant_id, result["ids"]))
        found = {chunk.id: chunk for chunk in _own(chunks, tenant_id)}
        return [found[cid] for cid in wanted if cid in found]

    def iter_chunks(self, tenant_id: str) -> Iterator[Chunk]:
        """Every chunk of the tenant, page by page (for building its keyword index)."""
        collection = self._collection(tenant_id, create=False)
        if collection is None:
            return
        for page in self._pages(collection, tenant_id):
            yield from page

    def chunk_ids(self, tenant_id: str) -> list[str]:
        """Every chunk id of the tenant. The collection is the tenant's own; callers read the
        chunks themselves through `get_chunks`, which checks each chunk's tenant."""
        collection = self._collection(tenant_id, create=False)
        if collection is None:
            return []
        # One call: paging by offset re-walks the skipped rows, quadratic in the tenant's size.
        return list(collection.get(include=[])["ids"])

    def _pages(
        self, collection: Collection, tenant_id: str, *, with_documents: bool = False
    ) -> Iterator[list[Chunk]]:
        """The collection's chunks of the tenant, PAGE_SIZE at a time, with their texts
        (`with_documents` also reads texts stored in Chroma by the earlier layout)."""
        include = ["documents", "metadatas"] if with_documents else ["metadatas"]
        offset = 0
        while True:
            result = collection.get(
                where={"tenant_id": tenant_id},
                limit=PAGE_SIZE,
                offset=offset,
                include=include,  # type: ignore[arg-type]
            )
            if not result["ids"]:
                return
            yield _records(result, self._texts.get(tenant_id, result["ids"]))
            offset += len(result["ids"])

    def count(self, tenant_id: str) -> int:
        """Number of chunks the tenant has."""
        collection = self._collection(tenant_id, create=False)
        return 0 if collection is None else collection.count()

    def corpus_version(self, tenant_id: str) -> int:
        """Changes on every write or delete; read fresh, so other clients' writes are seen."""
        collection = self._collection(tenant_id, create=False)
        if collection is None:
            return 0
        fresh = self._client.get_collection(collection.name, embedding_function=None)
        return int((fresh.metadata or {}).get("corpus_version", 0))


def _own(chunks: list[Chunk], tenant_id: str) -> list[Chunk]:
    """The chunks that belong to the tenant; any other is dropped and reported loudly."""
    owned = [chunk for chunk in chunks if chunk.tenant_id == tenant_id]
    if len(owned) != len(chunks):
        log.error(
            "foreign chunks in a tenant collection were dropped",
            extra={"tenant_id": tenant_id, "dropped": len(chunks) - len(owned)},
        )
    return owned


def _check_tenant(tenant_id: str) -> None:
    if not tenant_id or not tenant_id.strip():
        raise ValueError("tenant_id must be a non-empty string")


def _document_filter(tenant_id: str, document_id: str) -> dict[str, Any]:
    return {"$and": [{"tenant_id": tenant_id}, {"document_id": document_id}]}


def build_vector_store(
    settings: Settings, embedder: Embedder | None = None, database: Database | None = None
) -> ChromaVectorStore:
    """The configured Chroma store (persistent directory or server) for the configured embedder,
    its chunk texts in `database` (by default the service database the settings name)."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    if embedder is None:
        from app.providers.embeddings import build_embedder

        embedder = build_embedder(settings)
    if database is None:
        database = database_from_settings(settings)
    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    client: ClientAPI
    if settings.vector_backend == "chroma-http":
        client = chromadb.HttpClient(
            host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings
        )
    else:
        path = settings.data_dir / "chroma"
        path.mkdir(parents=True, exist_ok=True)
        client = chromadb.PersistentClient(path=str(path), settings=chroma_settings)
    return ChromaVectorStore(client, embedder, ChunkTextStore(database))
