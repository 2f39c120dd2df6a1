"""Chroma implementation of `VectorIndex`: one collection per tenant and embedding model.

We call chromadb directly rather than through langchain-chroma: its `Chroma` class always embeds
texts itself (no way to upsert precomputed vectors) and exposes no delete by metadata filter,
which deleting a document needs.

A collection is named from a hash of the tenant id and a hash of (embedding model id, dimension,
storage layout), so vectors of two models never share a collection; a tenant whose collection was
built with another model is refused until `python -m app.cli reindex` has rebuilt it. Distance
is cosine, set explicitly. A collection also records the form of the text its vectors were made
from (`EMBEDDED_TEXT_FORM`); one made before embedders stripped Arabic vowel marks is still
searched, and `reindex` re-embeds it in place.

Chroma holds each chunk's vector and the two keys deletes filter on (tenant, document); the
chunk's record lives in the service database (`app.storage.chunks` has the measured reason). A
collection of the earlier layout, which kept records in Chroma too, is refused until
`scripts/migrate_chroma_layout.py` has moved its records to the database.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from app.errors import EmbeddingModelMismatch
from app.storage.vector_index import IndexedVector
from app.text.arabic import EMBEDDED_TEXT_FORM

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

    from app.config import Settings

COLLECTION_PREFIX = "rag"
PAGE_SIZE = 1000
# Part of every collection name and metadata: layout 2 keeps chunk records out of Chroma. A
# collection without it (the earlier layout) still holds records only it knows.
STORAGE_LAYOUT = 2


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


def holds_records(collection: Collection) -> bool:
    """Whether a collection is of the earlier layout, its chunk records kept only in Chroma."""
    return (collection.metadata or {}).get("storage_layout") is None


def migrate_command(tenant_id: str) -> str:
    """The one-off command that moves an earlier-layout tenant's records to the database."""
    return f"`python scripts/migrate_chroma_layout.py --tenant {tenant_id}`"


class ChromaVectorIndex:
    """Per-tenant vectors in Chroma (persistent directory or server); see module doc."""

    def __init__(self, client: ClientAPI, model_id: str, dimension: int) -> None:
        self.client = client
        self.model_id = model_id
        self.dimension = dimension
        self._collections: dict[str, Collection] = {}

    # --- collections ---

    def collection_name(self, tenant_id: str) -> str:
        """Name of the tenant's collection for the current embedding model."""
        _check_tenant(tenant_id)
        return collection_name(tenant_id, self.model_id, self.dimension)

    def _tenant_collections(self, tenant_id: str) -> list[str]:
        prefix = tenant_prefix(tenant_id)
        return [c.name for c in self.client.list_collections() if c.name.startswith(prefix)]

    def _stale_collections(self, tenant_id: str) -> list[str]:
        current = self.collection_name(tenant_id)
        return [name for name in self._tenant_collections(tenant_id) if name != current]

    def _create_collection(self, tenant_id: str) -> Collection:
        return self.client.get_or_create_collection(
            self.collection_name(tenant_id),
            embedding_function=None,  # we always supply vectors; never Chroma's default model
            configuration={"hnsw": {"space": "cosine"}},
            metadata={
                "tenant_id": tenant_id,
                "embedding_model_id": self.model_id,
                "dimension": self.dimension,
                "distance": "cosine",
                "storage_layout": STORAGE_LAYOUT,
                "embedded_text": EMBEDDED_TEXT_FORM,
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
            old = self.client.get_collection(stale[0], embedding_function=None)
            raise self._mismatch(tenant_id, old)
        if name in existing:
            collection = self.client.get_collection(name, embedding_function=None)
        elif create:
            collection = self._create_collection(tenant_id)
        else:
            return None
        self._collections[tenant_id] = collection
        return collection

    def _mismatch(self, tenant_id: str, old: Collection) -> EmbeddingModelMismatch:
        if holds_records(old):
            return EmbeddingModelMismatch(
                f"tenant {tenant_id!r} was indexed by an earlier version of this service "
                f"that stored chunk texts in Chroma; run {migrate_command(tenant_id)} to move them"
            )
        old_model = (old.metadata or {}).get("embedding_model_id", "an unknown model")
        old_dimension = (old.metadata or {}).get("dimension", "?")
        reindex = f"`python -m app.cli reindex --tenant {tenant_id}`"
        if (old_model, old_dimension) == (self.model_id, self.dimension):
            return EmbeddingModelMismatch(
                f"tenant {tenant_id!r} was indexed by an earlier version of this service; "
                f"run {reindex} to rebuild its vectors"
            )
        return EmbeddingModelMismatch(
            f"tenant {tenant_id!r} was indexed with embedding model {old_model} "
            f"(dimension {old_dimension}), but this service embeds with {self.model_id} "
            f"(dimension {self.dimension}); vectors of two models cannot be mixed. Run "
            f"{reindex} to re-embed its documents."
        )

    # --- writes ---

    def upsert(self, tenant_id: str, vectors: Sequence[IndexedVector]) -> None:
        """Add or overwrite vectors by chunk id, in pages Chroma accepts."""
        for entry in vectors:
            self._check_dimension(entry.vector)
        collection = self._collection(tenant_id, create=True)
        assert collection is not None
        self._upsert(collection, tenant_id, vectors)

    def _upsert(
        self, collection: Collection, tenant_id: str, vectors: Sequence[IndexedVector]
    ) -> None:
        step = min(PAGE_SIZE, self.client.get_max_batch_size())
        for begin in range(0, len(vectors), step):
            part = vectors[begin : begin + step]
            collection.upsert(
                ids=[entry.chunk_id for entry in part],
                embeddings=np.asarray([entry.vector for entry in part], dtype=np.float32),
                metadatas=[  # type: ignore[arg-type]
                    {"tenant_id": tenant_id, "document_id": entry.document_id} for entry in part
                ],
            )

    def delete(
        self, tenant_id: str, *, chunk_ids: Sequence[str] = (), document_id: str | None = None
    ) -> int:
        """Remove these ids and, given a document, its every vector; returns how many."""
        collection = self._collection(tenant_id, create=False)
        if collection is None:
            return 0
        doomed: set[str] = set()
        if chunk_ids:
            doomed.update(collection.get(ids=list(chunk_ids), include=[])["ids"])
        if document_id is not None:
            where = {"$and": [{"tenant_id": tenant_id}, {"document_id": document_id}]}
            doomed.update(collection.get(where=where, include=[])["ids"])  # type: ignore[arg-type]
        if doomed:
            collection.delete(ids=sorted(doomed))
        return len(doomed)

    def rebuild(self, tenant_id: str, pages: Iterable[Sequence[IndexedVector]]) -> bool:
        """Write `pages` into the current model's collection, then drop the tenant's others; or,
        when there are none but the collection's vectors were made from another text form,
        overwrite them in place. False when nothing needed rebuilding."""
        self._collections.pop(tenant_id, None)
        stale = self._stale_collections(tenant_id)
        if not stale:
            return self._refresh_text_form(tenant_id, pages)
        for name in stale:
            old = self.client.get_collection(name, embedding_function=None)
            if holds_records(old):  # dropping it would lose chunks the database lacks
                raise self._mismatch(tenant_id, old)
        target = self._create_collection(tenant_id)
        for page in pages:
            for entry in page:
                self._check_dimension(entry.vector)
            self._upsert(target, tenant_id, page)
        for name in stale:
            self.client.delete_collection(name)
        self._collections[tenant_id] = target
        return True

    def _refresh_text_form(self, tenant_id: str, pages: Iterable[Sequence[IndexedVector]]) -> bool:
        """Re-embedded vectors over those of the current collection if it records another text
        form; the record changes last, so an interrupted run is simply repeated."""
        name = self.collection_name(tenant_id)
        if name not in self._tenant_collections(tenant_id):
            return False
        collection = self.client.get_collection(name, embedding_function=None)
        metadata = dict(collection.metadata or {})
        if metadata.get("embedded_text") == EMBEDDED_TEXT_FORM:
            return False
        for page in pages:
            for entry in page:
                self._check_dimension(entry.vector)
            self._upsert(collection, tenant_id, page)
        collection.modify(metadata={**metadata, "embedded_text": EMBEDDED_TEXT_FORM})
        return True

    def _check_dimension(self, vector: Sequence[float]) -> None:
        if len(vector) != self.dimension:
            raise ValueError(
                f"vector of length {len(vector)} for {self.model_id} (dimension {self.dimension})"
            )

    # --- reads ---

    def query(self, tenant_id: str, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
        """The k nearest chunk ids by cosine similarity (1 - cosine distance), best first."""
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        if len(vector) != self.dimension:
            raise ValueError(f"query vector of length {len(vector)}, expected {self.dimension}")
        collection = self._collection(tenant_id, create=False)
        if collection is None:
            return []
        result = collection.query(
            query_embeddings=np.asarray([vector], dtype=np.float32),
            n_results=k,
            # No `where` here: a metadata filter makes Chroma's HNSW query ~10x slower (74 vs
            # 6.6 ms at 10k chunks). The collection is the tenant's own, and the corpus service
            # returns a hit only with the row the tenant owns.
            include=["distances"],  # type: ignore[list-item]
        )
        ids = result["ids"][0]
        distances = (result["distances"] or [[]])[0]
        return [(cid, 1.0 - float(d)) for cid, d in zip(ids, distances, strict=True)]

    def count(self, tenant_id: str) -> int:
        """Number of the tenant's vectors (asks Chroma, so it also proves it answers)."""
        collection = self._collection(tenant_id, create=False)
        return 0 if collection is None else collection.count()


def _check_tenant(tenant_id: str) -> None:
    if not tenant_id or not tenant_id.strip():
        raise ValueError("tenant_id must be a non-empty string")


def chroma_client(settings: Settings) -> ClientAPI:
    """The configured Chroma client: a persistent directory under data_dir, or a server."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if settings.vector_backend == "chroma-http":
        if settings.chroma_token:
            chroma_settings = ChromaSettings(
                anonymized_telemetry=False,
                chroma_client_auth_provider="chromadb.auth.token_authn.TokenAuthClientProvider",
                chroma_client_auth_credentials=settings.chroma_token,
            )
        return chromadb.HttpClient(
            host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings
        )
    path = settings.data_dir / "chroma"
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=chroma_settings)


def build_vector_index(settings: Settings, model_id: str, dimension: int) -> ChromaVectorIndex:
    """The configured Chroma index for vectors of one embedding model and dimension."""
    return ChromaVectorIndex(chroma_client(settings), model_id, dimension)
