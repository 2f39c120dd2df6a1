"""Embedded Chroma with its native HNSW cache bounded to RAG_HOT_TENANTS collections.

Chroma loses an evicted index that never reached the disk ("Nothing found on disk"); these
tenants are the cases that did: one vector, a few vectors, and a collection made with Chroma's
default sync threshold before the bound existed. Every one must still find its own vectors after
the others pushed it out of the cache, twice over.
"""

from __future__ import annotations

from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings

from app.config import load_settings
from app.storage.chroma_index import ChromaVectorIndex, chroma_client, collection_name
from app.storage.vector_index import IndexedVector
from tests.fakes import FakeEmbedder
from tests.storage.test_vector_index_conformance import chroma_server

__all__ = ["chroma_server"]  # the module's `chroma run` fixture, shared

pytestmark = pytest.mark.integration

DIM = FakeEmbedder().dimension
MODEL = FakeEmbedder().model_id
HOT = 2
ROUNDS = 6  # later single writes per tenant


def one_hot(position: int) -> list[float]:
    return [1.0 if n == position else 0.0 for n in range(DIM)]


def make_legacy_tenant(
    path: Path, tenant: str, position: int, hnsw: dict[str, int] | None = None
) -> None:
    """A one-vector collection as the service wrote it before: Chroma's default sync (1000), or
    the `hnsw` settings given (a sync threshold and batch size of 2, the release before)."""
    client = chromadb.PersistentClient(path=str(path), settings=ChromaSettings())
    collection = client.create_collection(
        collection_name(tenant, MODEL, DIM),
        embedding_function=None,
        configuration={"hnsw": {"space": "cosine", **(hnsw or {})}},
        metadata={"storage_layout": 2, "embedding_model_id": MODEL, "dimension": DIM},
    )
    collection.upsert(
        ids=[f"{tenant}-0"],
        embeddings=[one_hot(position)],
        metadatas=[{"tenant_id": tenant, "document_id": "d"}],
    )
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()  # as a restart would: the next client is new


def test_over_a_chroma_server_the_handles_stay_at_the_bound_and_results_right(
    chroma_server: int,
) -> None:
    settings = load_settings(
        _env_file=None,
        vector_backend="chroma-http",
        chroma_host="127.0.0.1",
        chroma_port=chroma_server,
        hot_tenants=HOT,
    )
    index = ChromaVectorIndex(chroma_client(settings), MODEL, DIM, hot_tenants=HOT)
    tenants = [f"server-{n}" for n in range(6)]
    for n, tenant in enumerate(tenants):
        index.upsert(tenant, [IndexedVector(f"{tenant}-0", "d", one_hot(n))])
    for _ in range(2):
        for n, tenant in enumerate(tenants):
            assert index.query(tenant, one_hot(n), k=5) == [
                (f"{tenant}-0", pytest.approx(1.0, abs=1e-4))
            ]
            assert len(index.hot_tenants) <= HOT


def test_every_tenant_finds_its_vectors_after_the_cache_evicted_it(tmp_path: Path) -> None:
    settings = load_settings(_env_file=None, data_dir=tmp_path, hot_tenants=HOT)
    make_legacy_tenant(tmp_path / "chroma", "legacy", 0)
    client = chroma_client(settings)
    assert client._server.hnsw_cache_size == HOT  # type: ignore[attr-defined]
    index = ChromaVectorIndex(client, MODEL, DIM, hot_tenants=HOT)
    sizes, positions = {"legacy": 1}, {"legacy": 0}
    for n, size in enumerate((1, 1, 3, 2, 5, 1) * 3, start=1):
        tenant = f"tenant-{n}"
        sizes[tenant], positions[tenant] = size, n * 8
        index.upsert(
            tenant,
            [IndexedVector(f"{tenant}-{i}", "d", one_hot(n * 8 + i)) for i in range(size)],
        )
    for _ in range(2):
        for tenant, size in sizes.items():
            last = size - 1
            hits = index.query(tenant, one_hot(positions[tenant] + last), k=10)
            assert hits[0] == (f"{tenant}-{last}", pytest.approx(1.0, abs=1e-4))
            assert sorted(cid for cid, _ in hits) == sorted(f"{tenant}-{i}" for i in range(size))
            assert len(index.hot_tenants) <= HOT


def test_vectors_added_later_one_at_a_time_survive_evictions_and_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Single vectors written later, one upsert each, are all still there after their collection
    was evicted and read back, round after round, and after a restart. (At a sync threshold of
    2 a lone later vector was lost now and then, and each was written twice to make up for it;
    the collections now persist every write, so each upload writes its vectors once.)"""
    from chromadb.api.models.Collection import Collection
    from chromadb.api.shared_system_client import SharedSystemClient

    settings = load_settings(_env_file=None, data_dir=tmp_path, hot_tenants=HOT)
    index = ChromaVectorIndex(chroma_client(settings), MODEL, DIM, hot_tenants=HOT)
    writes: list[int] = []
    real_upsert = Collection.upsert

    def counted(self: Collection, *args: object, **kwargs: object) -> None:
        writes.append(len(kwargs["ids"]))  # type: ignore[arg-type]
        real_upsert(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Collection, "upsert", counted)
    tenants = [f"later-{n}" for n in range(12)]
    written: dict[str, list[str]] = {tenant: [] for tenant in tenants}

    def assert_all_found() -> None:
        for n, tenant in enumerate(tenants):
            hits = index.query(tenant, one_hot(n * ROUNDS + len(written[tenant]) - 1), k=10)
            assert hits[0] == (written[tenant][-1], pytest.approx(1.0, abs=1e-4))
            assert sorted(cid for cid, _ in hits) == sorted(written[tenant])
            assert len(index.hot_tenants) <= HOT

    for round_number in range(ROUNDS):  # each round pushes every tenant out of the cache
        for n, tenant in enumerate(tenants):
            chunk_id = f"{tenant}-{round_number}"
            index.upsert(tenant, [IndexedVector(chunk_id, "d", one_hot(n * ROUNDS + round_number))])
            written[tenant].append(chunk_id)
        assert_all_found()
    assert writes == [1] * (ROUNDS * len(tenants))  # one write per upload
    SharedSystemClient.clear_system_cache()  # as a restart would: the next client is new
    index = ChromaVectorIndex(chroma_client(settings), MODEL, DIM, hot_tenants=HOT)
    assert_all_found()


def test_a_collection_of_the_release_before_keeps_later_single_vectors_through_evictions(
    tmp_path: Path,
) -> None:
    """Collections made at a sync threshold of 2 (and written twice per single vector) are
    switched to persisting every write when first opened; later single writes survive."""
    tenants = [f"older-{n}" for n in range(6)]
    for n, tenant in enumerate(tenants):
        make_legacy_tenant(
            tmp_path / "chroma", tenant, n * 8, {"sync_threshold": 2, "batch_size": 2}
        )
    settings = load_settings(_env_file=None, data_dir=tmp_path, hot_tenants=HOT)
    index = ChromaVectorIndex(chroma_client(settings), MODEL, DIM, hot_tenants=HOT)
    for round_number in range(1, 4):
        for n, tenant in enumerate(tenants):
            vector = IndexedVector(f"{tenant}-{round_number}", "e", one_hot(n * 8 + round_number))
            index.upsert(tenant, [vector])
        for n, tenant in enumerate(tenants):
            hits = index.query(tenant, one_hot(n * 8 + round_number), k=10)
            assert hits[0] == (f"{tenant}-{round_number}", pytest.approx(1.0, abs=1e-4))
            assert len(hits) == round_number + 1


def test_the_embedded_store_keeps_a_write_ahead_log_for_new_and_existing_directories(
    tmp_path: Path,
) -> None:
    """Chroma's SQLite database in rollback-journal mode synced and deleted a journal file per
    transaction while its native code held the GIL; WAL mode is set before Chroma opens it."""
    import sqlite3

    fresh = load_settings(_env_file=None, data_dir=tmp_path / "fresh", hot_tenants=HOT)
    index = ChromaVectorIndex(chroma_client(fresh), MODEL, DIM, hot_tenants=HOT)
    index.upsert("t", [IndexedVector("t-0", "d", one_hot(0))])
    older = tmp_path / "older"
    make_legacy_tenant(older / "chroma", "legacy", 3)  # made by Chroma alone: rollback journal

    def journal_mode(chroma_dir: Path) -> str:
        with sqlite3.connect(chroma_dir / "chroma.sqlite3") as connection:
            return str(connection.execute("PRAGMA journal_mode").fetchone()[0])

    assert journal_mode(older / "chroma") == "delete"
    existing = load_settings(_env_file=None, data_dir=older, hot_tenants=HOT)
    reopened = ChromaVectorIndex(chroma_client(existing), MODEL, DIM, hot_tenants=HOT)
    assert journal_mode(tmp_path / "fresh" / "chroma") == "wal"
    assert journal_mode(older / "chroma") == "wal"
    assert reopened.query("legacy", one_hot(3), k=3) == [("legacy-0", pytest.approx(1.0, abs=1e-4))]
    assert index.query("t", one_hot(0), k=3) == [("t-0", pytest.approx(1.0, abs=1e-4))]
