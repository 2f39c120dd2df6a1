"""The compose stack's Chroma server with its HNSW cache bounded (docker/chroma/bounded_cache.py).

Started as the chroma image starts it: chromadb's own server with CHROMA_API_IMPL naming the
bounded class. Tenants past the bound still find their own chunks (their index is reloaded from
disk), and the server's memory grows less per collection than with chromadb's own cache (measured
1.6 against 2.8 MB per small collection: the HNSW indexes are released, the rest of Chroma's
per-collection state is not).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from chroma_helpers import ingest, python_chroma_server

from app.config import Settings
from app.services.corpus import Corpus, build_corpus
from tests.fakes import FakeEmbedder

pytestmark = pytest.mark.integration

IMAGE_CONTEXT = Path(__file__).resolve().parents[2] / "docker" / "chroma"
BOUND = 3


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _server_env(bound: str) -> dict[str, str]:
    return {
        "PYTHONPATH": str(IMAGE_CONTEXT),
        "CHROMA_API_IMPL": "bounded_cache.BoundedCacheAPI",
        "CHROMA_HNSW_CACHE_COLLECTIONS": bound,
    }


@pytest.fixture
def bounded_server(tmp_path: Path, settings: Settings) -> Iterator[tuple[Corpus, int]]:
    with python_chroma_server(tmp_path, _server_env(str(BOUND))) as server:
        http = settings.model_copy(
            update={
                "vector_backend": "chroma-http",
                "chroma_host": "127.0.0.1",
                "chroma_port": int(server.args[-1]),
            }
        )
        yield build_corpus(http, FakeEmbedder()), server.pid


def _note(n: int) -> str:
    return f"pump P{n} in hall {n} resets with code Z{n}Q"


def test_tenants_past_the_bound_find_their_own_chunks(bounded_server):
    corpus, _ = bounded_server
    embedder = FakeEmbedder()
    tenants = [f"tenant{n}" for n in range(3 * BOUND)]
    for n, tenant in enumerate(tenants):
        ingest(corpus, embedder, tenant, f"note-{n}.txt", [_note(n), f"filler text {n} only"])
    for _ in range(2):  # every tenant was evicted from the server's cache in between
        for n, tenant in enumerate(tenants):
            hits = corpus.query(tenant, embedder.embed_query(_note(n)), 2)
            assert hits[0][0].text == _note(n)
            assert {chunk.tenant_id for chunk, _ in hits} == {tenant}


def _growth_per_collection(root: Path, settings: Settings, env: dict[str, str]) -> float:
    """MB the server's resident memory grows per small collection written and searched."""
    embedder, collections = FakeEmbedder(), 40
    with python_chroma_server(root, env) as server:
        http = settings.model_copy(
            update={
                "vector_backend": "chroma-http",
                "chroma_host": "127.0.0.1",
                "chroma_port": int(server.args[-1]),
            }
        )
        corpus = build_corpus(http, embedder)
        for n in range(5):  # the server's own first allocations are not per collection
            ingest(corpus, embedder, f"warm{n}", "note.txt", [_note(n)])
        before = _rss_mb(server.pid)
        for n in range(collections):
            ingest(corpus, embedder, f"many{n}", "note.txt", [_note(n)])
            corpus.query(f"many{n}", embedder.embed_query(_note(n)), 1)
        return (_rss_mb(server.pid) - before) / collections


def test_server_memory_grows_less_per_collection_than_with_chromas_own_cache(tmp_path, settings):
    bounded = _growth_per_collection(tmp_path / "bounded", settings, _server_env(str(BOUND)))
    unbounded = _growth_per_collection(tmp_path / "unbounded", settings, {})
    print(f"chroma server MB per collection: bounded {bounded:.2f}, unbounded {unbounded:.2f}")
    # Measured 1.6 against 2.8 MB: the HNSW indexes go; Chroma's other per-collection state stays.
    assert bounded < 0.75 * unbounded


@pytest.mark.parametrize("bad", ["0", "-4", "many"])
def test_a_bound_that_is_not_a_positive_integer_stops_the_server(monkeypatch, bad):
    monkeypatch.syspath_prepend(str(IMAGE_CONTEXT))
    sys.modules.pop("bounded_cache", None)
    import bounded_cache

    monkeypatch.setenv(bounded_cache.CACHE_VARIABLE, bad)
    with pytest.raises(ValueError, match="CHROMA_HNSW_CACHE_COLLECTIONS"):
        bounded_cache.cache_collections()
