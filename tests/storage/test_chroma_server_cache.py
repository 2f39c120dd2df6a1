"""The compose stack's Chroma server with its HNSW cache bounded (docker/chroma/bounded_cache.py).

Started as the chroma image starts it: chromadb's own server with CHROMA_API_IMPL naming the
bounded class. Tenants past the bound still find their own chunks (their index is reloaded from
disk). What it saves is measured by `python -m bench.chroma_server_cache 3 40 --python-server`
(bench/README.md "Many tenants"), not asserted here: RSS per collection is too noisy for a test.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from chroma_helpers import ingest, python_chroma_server
from chromadb.api import ServerAPI
from chromadb.config import Settings as ChromaSettings
from chromadb.config import System

from app.config import Settings
from app.services.blocks.corpus import Corpus
from testkit.indexing import build_corpus
from tests.fakes import FakeEmbedder

pytestmark = pytest.mark.integration

IMAGE_CONTEXT = Path(__file__).resolve().parents[2] / "docker" / "chroma"
BOUND = 3


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
            hits = corpus.query(tenant_id=tenant, vector=embedder.embed_query(_note(n)), k=2)
            assert hits[0][0].text == _note(n)
            assert {chunk.tenant_id for chunk, _ in hits} == {tenant}


def test_the_images_settings_select_the_bounded_cache(monkeypatch, tmp_path):
    # What the chroma image sets (docker/chroma/Dockerfile), read by chromadb's own Settings.
    monkeypatch.syspath_prepend(str(IMAGE_CONTEXT))
    for name, value in {**_server_env("7"), "IS_PERSISTENT": "TRUE"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PERSIST_DIRECTORY", str(tmp_path))
    api = System(ChromaSettings()).instance(ServerAPI)  # type: ignore[type-abstract]
    assert type(api).__name__ == "BoundedCacheAPI"
    assert api.hnsw_cache_size == 7  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", ["0", "-4", "many"])
def test_a_bound_that_is_not_a_positive_integer_stops_the_server(monkeypatch, bad):
    monkeypatch.syspath_prepend(str(IMAGE_CONTEXT))
    sys.modules.pop("bounded_cache", None)
    import bounded_cache

    monkeypatch.setenv(bounded_cache.CACHE_VARIABLE, bad)
    with pytest.raises(ValueError, match="CHROMA_HNSW_CACHE_COLLECTIONS"):
        bounded_cache.cache_collections()
