"""Chroma implementation of `VectorStore`: one collection per tenant and embedding model.

We call chromadb directly rather than through langchain-chroma: its `Chroma` class always embeds
texts itself (no way to upsert precomputed vectors) and exposes no delete by metadata filter,
which deleting a document needs.

A collection is named from a hash of the tenant id and a hash of (embedding model id, dimension,
storage layout), so vectors of two models never share a collection; a tenant whose collection was
built with another model, or by the earlier layout, is refused until `reindex_tenant` has rebuilt
it. Distance is cosine, set explicitly.

Chroma holds each chunk's vector and the two keys deletes filter on (tenant, document). The
chunk's record (text, source, page, offsets) and the tenant's corpus version live in the service
database (`ChunkStore`; that module has the measured reason and the write order that makes its
rows the truth about which chunks exist). A nearest-neighbour hit is returned only with its row,
read under the asking tenant: another tenant's chunk can never come back, even if a bug put its
vector in this collection.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from app.domain import Chunk
from app.errors import EmbeddingModelMismatch
from app.storage.chunks import ChunkStore
from app.storage.db import Database, database_from_settings

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

    from app.config import Settings
    from app.providers.types import Embedder

COLLECTION_PREFIX = "rag"
PAGE_SIZE = 1000
# Part of every collection name: layout 2 keeps chunk records out of Chroma. A collection of the
# earlier layout (texts and locations stored in Chroma) is refused until reindexed.
STORAGE_LAYOUT = 2
LEGACY_METADATA = (
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


def _legacy_chunks(result: Any) -> list[Chunk]:
    """Chunks of a collection of the earlier layout, which kept texts and locations in Chroma."""
    chunks = []
    for cid, text, meta in zip(
        result["ids"], result["documents"], result["metadatas"], strict=True
    ):
        extra = {k: v for k, v in meta.items() if k not in LEGACY_METADATA}
        chunks.append(
            Chunk(
                id=cid,
                tenant_id=str(meta["tenant_id"]),
                document_id=str(meta["document_id"]),
                source=str(meta["source"]),
                page=int(meta["page"]),
                page_label=str(meta["page_label"]),
                chunk_index=int(meta["chunk_index"]),
                start=int(meta["start"]),
                end=int(meta["end"]),
                text=text or "",
                metadata=extra,
            )
        )
    return chunks


class ChromaVectorStore:
    """Per-tenant chunk storage in Chroma (persistent directory or server); see module doc."""

    def __init__(self, client: ClientAPI, embedder: Embedder, chunks: ChunkStore) -> None:
        self._client = client
        self._embedder = embedder
        self._chunks = chunks
        self._model_id = embedder.model_id
        self._dimension = embedder.dimension
        self._collections: dict[str, Collection] = {}
        # Serialises this process's writes, so a reindex never interleaves with an upload.
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

    # --- writes ---

    def replace_document(
        self,
        tenant_id: str,
        document_id: str,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]],
    ) -> None:
        """Upsert these chunks; afterwards no other chunk of the document survives."""
        self.replace_documents(tenant_id, [(document_id, chunks, vectors)])

    def replace_documents(
        self,
        tenant_id: str,
        documents: Sequence[tuple[str, Sequence[Chunk], Sequence[Sequence[float]]]],
    ) -> None:
        """`replace_document` for several documents: one upsert, one transaction of rows."""
        for document_id, chunks, vectors in documents:
            self._check_vectors(tenant_id, document_id, chunks, vectors)
        all_chunks = [chunk for _, chunks, _ in documents for chunk in chunks]
        all_vectors = [vector for _, _, vectors in documents for vector in vectors]
        with self._write_lock:
            collection = self._collection(tenant_id, create=True)
            assert collection is not None
            self._upsert(collection, all_chunks, all_vectors)
            # The rows after the vectors: a chunk exists once its row does.
            obsolete = self._chunks.write_documents(
                tenant_id, {document_id: chunks for document_id, chunks, _ in documents}
            )
            if obsolete:
                collection.delete(ids=obsolete)

    def _check_vectors(
        self,
        tenant_id: str,
        document_id: str,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]],
    ) -> None:
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

    def _upsert(
        self, collection: Collection, chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]]
    ) -> None:
        step = min(PAGE_SIZE, self._client.get_max_batch_size())
        for begin in range(0, len(chunks), step):
            part = chunks[begin : begin + step]
            collection.upsert(
                ids=[chunk.id for chunk in part],
                embeddings=np.asarray(vectors[begin : begin + step], dtype=np.float32),
                metadatas=[  # type: ignore[arg-type]
                    {"tenant_id": chunk.tenant_id, "document_id": chunk.document_id}
                    for chunk in part
                ],
            )

    def delete_document(self, tenant_id: str, document_id: str) -> int:
        """Remove every chunk of a document; returns how many were removed."""
        with self._write_lock:
            removed = self._chunks.delete_document(tenant_id, document_id)  # rows first
            collection = self._collection(tenant_id, create=False)
            if collection is not None:
                where = _document_filter(tenant_id, document_id)
                ids = collection.get(where=where, include=[])["ids"]
                if ids:
                    collection.delete(ids=ids)
            return removed

    def reindex_tenant(self, tenant_id: str) -> int:
        """Re-embed the tenant's chunks from older-model collections into the current one.

        Returns how many chunks were re-embedded. The old collection is dropped only after the
        new one holds every chunk, so an interrupted run can simply be repeated. A collection of
        the earlier storage layout is rebuilt the same way, its records moved to the database.
        """
        with self._write_lock:
            self._collections.pop(tenant_id, None)
            stale = self._stale_collections(tenant_id)
            if not stale:
                return 0
            target = self._create_collection(tenant_id)
            total = 0
            for page in self._chunks_to_reindex(tenant_id, stale):
                vectors = self._embedder.embed_documents([chunk.text for chunk in page])
                self._upsert(target, page, vectors)
                self._chunks.add(page)
                total += len(page)
            self._chunks.bump_version(tenant_id)
            for old_name in stale:
                self._client.delete_collection(old_name)
            self._collections[tenant_id] = target
            return total

    def _chunks_to_reindex(self, tenant_id: str, stale: list[str]) -> Iterator[list[Chunk]]:
        """Pages of the tenant's chunks: from the database, or from earlier-layout collections."""
        # The database's rows first: the pages taken from an earlier-layout collection are
        # added to it as they go, and must not be read twice.
        page: list[Chunk] = []
        for chunk in self._chunks.iter_tenant(tenant_id):
            page.append(chunk)
            if len(page) == PAGE_SIZE:
                yield page
                page = []
        if page:
            yield page
        for name in stale:
            old = self._client.get_collection(name, embedding_function=None)
            if (old.metadata or {}).get("storage_layout") == STORAGE_LAYOUT:
                continue  # another model's vectors; its chunks are the rows read above
            offset = 0
            while True:
                result = old.get(
                    where={"tenant_id": tenant_id},
                    limit=PAGE_SIZE,
                    offset=offset,
                    include=["documents", "metadatas"],  # type: ignore[list-item]
                )
                if not result["ids"]:
                    break
                yield [c for c in _legacy_chunks(result) if c.tenant_id == tenant_id]
                offset += len(result["ids"])

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
            # 6.6 ms at 10k chunks). The collection is the tenant's own, and a hit comes back
            # only with the row the tenant owns.
            include=["distances"],  # type: ignore[list-item]
        )
        ids = result["ids"][0]
        distances = dict(zip(ids, (result["distances"] or [[]])[0], strict=True))
        chunks = self._chunks.get(tenant_id, ids)
        if len(chunks) != len(ids):
            log.warning(
                "nearest neighbours without a chunk row were skipped (an interrupted write or a "
                "foreign vector)",
                extra={"tenant_id": tenant_id, "skipped": len(ids) - len(chunks)},
            )
        return [(chunk, 1.0 - float(distances[chunk.id])) for chunk in chunks]

    def find_containing(self, tenant_id: str, text: str, limit: int) -> list[Chunk]:
        """Chunks whose text contains `text` exactly (case-sensitive), up to `limit`."""
        return self._chunks.find_containing(tenant_id, text, limit)

    def get_chunks(self, tenant_id: str, ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids that belong to the tenant, in the given order."""
        return self._chunks.get(tenant_id, ids)

    def iter_chunks(self, tenant_id: str) -> Iterator[Chunk]:
        """Every chunk of the tenant, page by page (for building its keyword index)."""
        self._collection(tenant_id, create=False)  # refuses a tenant that needs a reindex
        return self._chunks.iter_tenant(tenant_id)

    def chunk_ids(self, tenant_id: str) -> list[str]:
        """Every chunk id of the tenant."""
        self._collection(tenant_id, create=False)
        return self._chunks.ids(tenant_id)

    def count(self, tenant_id: str) -> int:
        """Number of chunk vectors the tenant has (asks Chroma, so it also proves it answers)."""
        collection = self._collection(tenant_id, create=False)
        return 0 if collection is None else collection.count()

    def corpus_version(self, tenant_id: str) -> int:
        """Changes on every write or delete, in this process or another one."""
        return self._chunks.version(tenant_id)


def _check_tenant(tenant_id: str) -> None:
    if not tenant_id or not tenant_id.strip():
        raise ValueError("tenant_id must be a non-empty string")


def _document_filter(tenant_id: str, document_id: str) -> dict[str, Any]:
    return {"$and": [{"tenant_id": tenant_id}, {"document_id": document_id}]}


def build_vector_store(
    settings: Settings, embedder: Embedder, database: Database | None = None
) -> ChromaVectorStore:
    """The configured Chroma store (persistent directory or server) for `embedder`, its chunk
    records in `database` (by default the service database the settings name)."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    if database is None:
        database = database_from_settings(settings)
    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    client: ClientAPI
    if settings.vector_backend == "chroma-http":
        if settings.chroma_token:
            chroma_settings = ChromaSettings(
                anonymized_telemetry=False,
                chroma_client_auth_provider="chromadb.auth.token_authn.TokenAuthClientProvider",
                chroma_client_auth_credentials=settings.chroma_token,
            )
        client = chromadb.HttpClient(
            host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings
        )
    else:
        path = settings.data_dir / "chroma"
        path.mkdir(parents=True, exist_ok=True)
        client = chromadb.PersistentClient(path=str(path), settings=chroma_settings)
    return ChromaVectorStore(client, embedder, ChunkStore(database))
