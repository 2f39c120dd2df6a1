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

Memory (measured in bench/README.md "Many tenants"): embedded Chroma keeps every
collection it touched in a native HNSW cache sized RLIMIT_NOFILE // 5 collections (4,000 here,
200k in a container), each a preallocated index of ~2.6 MB even for one vector; its
`chroma_memory_limit_bytes` / `chroma_segment_cache_policy` settings are ignored by the Rust core.
So the embedded client is built with that cache bounded to RAG_HOT_TENANTS collections. Chroma
loses an evicted index that was never written to disk ("Nothing found on disk"), and with a
sync threshold of 2 a later single vector was lost now and then after an eviction, even in a
collection already on disk. So every collection applies and persists each write at once
(`SYNC_THRESHOLD` = 1: one write per upsert, where a single vector used to be written twice
to reach a threshold of 2), and a collection made before this is switched over and written once
when first opened. Persisting costs each write the index's size (`python -m bench.chroma_write`).
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections import abc
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.errors import EmbeddingModelMismatch
from app.memory import HotMap
from app.storage.db import SQLITE_BUSY_TIMEOUT_MS
from app.storage.scope_vectors import ScopeMatrix, ScopeVectors, scope_digest
from app.storage.vector_index import IndexedVector
from app.text.arabic import EMBEDDED_TEXT_FORM

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

    from app.config import Settings

log = logging.getLogger(__name__)

COLLECTION_PREFIX = "rag"
# Embedded Chroma's SQLite database (its log, metadata and collections), in its directory.
CHROMA_DATABASE = "chroma.sqlite3"
PAGE_SIZE = 1000
# Part of every collection name and metadata: layout 2 keeps chunk records out of Chroma. A
# collection without it (the earlier layout) still holds records only it knows.
STORAGE_LAYOUT = 2
# Chroma applies and writes a collection's HNSW index to disk after this many records (its
# default, 1000, left small tenants in memory only, and lost them when its cache evicted them;
# 2 lost a lone later vector now and then: tests/storage/test_chroma_hot_tenants.py).
SYNC_THRESHOLD = 1


def _short_hash(text: str, length: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def tenant_prefix(tenant_id: str, prefix: str = COLLECTION_PREFIX) -> str:
    """The part of a collection name that identifies the tenant (and the arm, by `prefix`)."""
    return f"{prefix}_{_short_hash(tenant_id, 20)}_"


def collection_name(
    tenant_id: str, model_id: str, dimension: int, prefix: str = COLLECTION_PREFIX
) -> str:
    """Collection of one tenant for one embedding model and dimension."""
    return tenant_prefix(tenant_id, prefix) + _short_hash(
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

    # Names this index's collections apart from another arm's (app/storage/second_index.py).
    prefix = COLLECTION_PREFIX

    def __init__(
        self,
        client: ClientAPI,
        model_id: str,
        dimension: int,
        hot_tenants: int = 64,
        after_eviction: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.model_id = model_id
        self.dimension = dimension
        evicted = None if after_eviction is None else (lambda _t, _c: after_eviction())
        # Handles of the tenants served most recently (a handle is small; what it stands for in
        # embedded Chroma's native cache is bounded by the same number, see `chroma_client`).
        self._collections: HotMap[str, Collection] = HotMap(hot_tenants, on_evict=evicted)
        # Tenants seen with only the current model's collection: finding one again after an
        # eviction is one lookup by name, not a listing of every tenant's collections (a
        # tenant id each, ~100 bytes; the same as a handle was before eviction existed).
        self._only_current: set[str] = set()
        # The vectors of recently searched small scopes (an exact scoped search reads them).
        self._scope_vectors = ScopeVectors()
        self.vectors_fetched = 0  # read back from the store for exact scoped searches

    @property
    def hot_tenants(self) -> list[str]:
        """The tenants whose collection handles are held, least recently used first."""
        return self._collections.keys()

    # --- collections ---

    def collection_name(self, tenant_id: str) -> str:
        """Name of the tenant's collection for the current embedding model."""
        _check_tenant(tenant_id)
        return collection_name(tenant_id, self.model_id, self.dimension, self.prefix)

    def _tenant_collections(self, tenant_id: str) -> list[str]:
        prefix = tenant_prefix(tenant_id, self.prefix)
        return [c.name for c in self.client.list_collections() if c.name.startswith(prefix)]

    def _stale_collections(self, tenant_id: str) -> list[str]:
        current = self.collection_name(tenant_id)
        return [name for name in self._tenant_collections(tenant_id) if name != current]

    def _create_collection(self, tenant_id: str) -> Collection:
        return self.client.get_or_create_collection(
            self.collection_name(tenant_id),
            embedding_function=None,  # we always supply vectors; never Chroma's default model
            configuration={
                "hnsw": {
                    "space": "cosine",
                    "sync_threshold": SYNC_THRESHOLD,
                    "batch_size": SYNC_THRESHOLD,
                }
            },
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
        if tenant_id in self._only_current:  # evicted earlier: skip listing every collection
            collection = self._get(name)
            if collection is not None:
                self._collections.put(tenant_id, collection)
                return collection
        existing = self._tenant_collections(tenant_id)
        stale = [other for other in existing if other != name]
        if stale:
            old = self.client.get_collection(stale[0], embedding_function=None)
            raise self._mismatch(tenant_id, old)
        if name in existing:
            collection = self.client.get_collection(name, embedding_function=None)
            _persist_promptly(collection)
        elif create:
            collection = self._create_collection(tenant_id)
        else:
            return None
        self._only_current.add(tenant_id)
        self._collections.put(tenant_id, collection)
        return collection

    def _get(self, name: str) -> Collection | None:
        from chromadb.errors import NotFoundError

        try:
            return self.client.get_collection(name, embedding_function=None)
        except NotFoundError:
            return None

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
        self._scope_vectors.overwritten(tenant_id, [entry.chunk_id for entry in vectors])

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
        self._collections.pop(tenant_id)
        self._only_current.discard(tenant_id)
        self._scope_vectors.forget(tenant_id)
        stale = self._stale_collections(tenant_id)
        if not stale:
            return self._refresh_text_form(tenant_id, pages)
        for name in stale:
            old = self.client.get_collection(name, embedding_function=None)
            if holds_records(old):  # dropping it would lose chunks the database lacks
                raise self._mismatch(tenant_id, old)
        target = self._create_collection(tenant_id)
        self._write_pages(target, tenant_id, pages)
        for name in stale:
            self.client.delete_collection(name)
        self._collections.put(tenant_id, target)
        return True

    def _refresh_text_form(self, tenant_id: str, pages: Iterable[Sequence[IndexedVector]]) -> bool:
        """Re-embedded vectors over those of the current collection if it records another text
        form; the record changes last, so an interrupted run is simply repeated."""
        collection = self._get(self.collection_name(tenant_id))
        if collection is None:
            return False
        metadata = dict(collection.metadata or {})
        if metadata.get("embedded_text") == EMBEDDED_TEXT_FORM:
            return False
        self._write_pages(collection, tenant_id, pages)
        collection.modify(metadata={**metadata, "embedded_text": EMBEDDED_TEXT_FORM})
        return True

    def _write_pages(
        self, collection: Collection, tenant_id: str, pages: Iterable[Sequence[IndexedVector]]
    ) -> None:
        """Upsert every page into `collection`, each vector's dimension checked first."""
        for page in pages:
            for entry in page:
                self._check_dimension(entry.vector)
            self._upsert(collection, tenant_id, page)

    def _check_dimension(self, vector: Sequence[float]) -> None:
        if len(vector) != self.dimension:
            raise ValueError(
                f"vector of length {len(vector)} for {self.model_id} (dimension {self.dimension})"
            )

    # --- reads ---

    def query(
        self,
        tenant_id: str,
        vector: Sequence[float],
        k: int,
        documents: abc.Collection[str] | None = None,
    ) -> list[tuple[str, float]]:
        """The k nearest chunk ids by cosine similarity (1 - cosine distance), best first; only
        vectors of `documents` when given (Chroma's `where`, applied inside its search)."""
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        if len(vector) != self.dimension:
            raise ValueError(f"query vector of length {len(vector)}, expected {self.dimension}")
        if documents is not None and not documents:
            return []
        collection = self._collection(tenant_id, create=False)
        if collection is None:
            return []
        # No `where` for the whole tenant: a metadata filter makes Chroma's HNSW query ~10x
        # slower (74 vs 6.6 ms at 10k chunks). The collection is the tenant's own, and the
        # corpus service returns a hit only with the row the tenant owns. A search scope is a
        # filter on the document id every vector carries, so moving a document between
        # collections rewrites no vector.
        where = None if documents is None else {"document_id": {"$in": sorted(documents)}}
        result = collection.query(
            query_embeddings=np.asarray([vector], dtype=np.float32),
            n_results=k,
            where=where,  # type: ignore[arg-type]
            include=["distances"],  # type: ignore[list-item]
        )
        ids = result["ids"][0]
        distances = (result["distances"] or [[]])[0]
        return [(cid, 1.0 - float(d)) for cid, d in zip(ids, distances, strict=True)]

    def nearest_among(
        self, tenant_id: str, vector: Sequence[float], k: int, chunk_ids: Sequence[str]
    ) -> list[tuple[str, float]]:
        """The k nearest of these chunks by exact cosine similarity, best first."""
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        if len(vector) != self.dimension:
            raise ValueError(f"query vector of length {len(vector)}, expected {self.dimension}")
        collection = self._collection(tenant_id, create=False)
        if collection is None or not chunk_ids:
            return []
        query = np.asarray(vector, dtype=np.float32)
        query /= np.linalg.norm(query) or 1.0
        wanted = sorted(set(chunk_ids))
        key = scope_digest(tenant_id, wanted)
        scope = self._scope_vectors.get(key)
        if scope is None:
            scope = self._assemble_units(collection, tenant_id, wanted)
            self._scope_vectors.put(key, tenant_id, scope)
        ids = scope.ids
        if not ids:
            return []
        similarity = scope.units @ query
        top = (
            np.argpartition(-similarity, min(k, len(ids)) - 1)[:k]
            if len(ids) > k
            else range(len(ids))
        )
        order = sorted(top, key=lambda i: (-float(similarity[i]), ids[i]))
        return [(ids[i], float(similarity[i])) for i in order]

    def _assemble_units(
        self, collection: Collection, tenant_id: str, wanted: list[str]
    ) -> ScopeMatrix:
        """The unit vectors of these chunk ids: those the tenant's newest kept scope holds
        (a scope an upload changed still shares most of them), the others fetched."""
        known = self._scope_vectors.newest(tenant_id)
        if known is None:
            return self._fetch_units(collection, wanted)
        held = [cid for cid in wanted if cid in known.row_of]
        missing = [cid for cid in wanted if cid not in known.row_of]
        return known.reused(held, self._fetch_units(collection, missing))

    def _fetch_units(self, collection: Collection, wanted: list[str]) -> ScopeMatrix:
        """The unit vectors of these chunk ids (those Chroma has), fetched in pages."""
        ids: list[str] = []
        rows: list[np.ndarray] = []
        step = min(PAGE_SIZE * 5, self.client.get_max_batch_size())
        for begin in range(0, len(wanted), step):
            page = collection.get(ids=wanted[begin : begin + step], include=["embeddings"])  # type: ignore[list-item]
            if not page["ids"]:
                continue
            matrix = np.asarray(page["embeddings"], dtype=np.float32)
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            ids += page["ids"]
            rows.append(matrix / norms)
        units = np.concatenate(rows) if rows else np.zeros((0, self.dimension), np.float32)
        self.vectors_fetched += len(ids)
        return ScopeMatrix(tuple(ids), units)

    def count(self, tenant_id: str) -> int:
        """Number of the tenant's vectors (asks Chroma, so it also proves it answers)."""
        collection = self._collection(tenant_id, create=False)
        return 0 if collection is None else collection.count()


def _persist_promptly(collection: Collection) -> None:
    """Switch a collection made with Chroma's default sync threshold to `SYNC_THRESHOLD`, and
    write one of its vectors back unchanged so that its index reaches the disk now."""
    hnsw = (collection.configuration or {}).get("hnsw") or {}
    if hnsw.get("sync_threshold") == SYNC_THRESHOLD:
        return
    collection.modify(configuration={"hnsw": {"sync_threshold": SYNC_THRESHOLD}})
    sample = collection.get(limit=1, include=["embeddings", "metadatas"])  # type: ignore[list-item]
    if sample["ids"]:
        collection.upsert(
            ids=sample["ids"],
            embeddings=np.asarray(sample["embeddings"], dtype=np.float32),
            metadatas=sample["metadatas"],
        )


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
    return _embedded_client(path, chroma_settings, settings.hot_tenants)


def use_write_ahead_log(database: Path) -> None:
    """Put embedded Chroma's SQLite database (made now if missing) in WAL mode, which SQLite
    keeps in the file, before Chroma opens it.

    Chroma leaves it in SQLite's rollback-journal mode: each of the three transactions of an
    upsert then creates, syncs and deletes a journal file (12 fsyncs an upsert), and Chroma's
    native code waits for them holding Python's GIL, so every other thread of the process (the
    HTTP requests, the other workers) stopped for 33-37 ms per upsert. In WAL mode, with
    Chroma's own synchronous setting (FULL: each commit is synced, as before), an upsert took
    4.7-5.5 ms (bench/README.md, "Ingestion")."""
    with closing(sqlite3.connect(database, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000)) as connection:
        (mode,) = connection.execute("PRAGMA journal_mode=WAL").fetchone()
    if mode != "wal":  # another process held the file: it stays as it was, slower but correct
        log.warning("Chroma's database stays in %s journal mode", mode)


def _embedded_client(path: Path, chroma_settings: Any, hot_tenants: int) -> ClientAPI:
    """A persistent client whose native HNSW cache holds at most `hot_tenants` collections.

    `PersistentClient` offers no way to size that cache, so the client's system is started here
    with it set; a directory this process already opened keeps its client (Chroma shares one
    system per directory)."""
    import chromadb
    from chromadb.api import ServerAPI
    from chromadb.api.client import Client
    from chromadb.api.shared_system_client import SharedSystemClient
    from chromadb.config import System
    from chromadb.telemetry.product import ProductTelemetryClient

    chroma_settings.persist_directory = str(path)
    chroma_settings.is_persistent = True
    if str(path) in SharedSystemClient._identifier_to_system:
        return chromadb.PersistentClient(path=str(path), settings=chroma_settings)
    use_write_ahead_log(path / CHROMA_DATABASE)
    system = System(chroma_settings)
    system.instance(ProductTelemetryClient)  # type: ignore[type-abstract]
    server = system.instance(ServerAPI)  # type: ignore[type-abstract]
    server.hnsw_cache_size = hot_tenants  # type: ignore[attr-defined]
    system.start()
    return Client.from_system(system)


def build_vector_index(
    settings: Settings,
    model_id: str,
    dimension: int,
    after_eviction: Callable[[], None] | None = None,
    kind: type[ChromaVectorIndex] = ChromaVectorIndex,
) -> ChromaVectorIndex:
    """The configured Chroma index (`kind`: the first arm's, or the second arm's subclass) for
    vectors of one embedding model and dimension."""
    return kind(
        chroma_client(settings),
        model_id,
        dimension,
        hot_tenants=settings.hot_tenants,
        after_eviction=after_eviction,
    )
