"""The scoped-search property of tests/retrieval/test_scoped_search.py on real Chroma, embedded
and over HTTP (a `chroma run` server), through both ways a scope reaches the dense arm: the
exact search among the scope's vectors and Chroma's `where` filter on the document id."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings
from hypothesis import HealthCheck, Phase, given, settings

from app.config import Settings
from app.retrieval.hybrid import build_retriever
from app.services.blocks.corpus import Corpus
from app.storage.chroma_index import ChromaVectorIndex
from app.storage.chunks import ChunkStore
from app.storage.db import open_database
from testkit.local_stack import chroma_server as running_chroma
from tests.fakes import FakeEmbedder
from tests.retrieval.test_scoped_search import (
    ScopedSearch,
    check_scoped_equals_filtered,
    scoped_searches,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def chroma_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A real Chroma server on a free port for this module."""
    with running_chroma(tmp_path_factory.mktemp("chroma-server")) as port:
        yield port


@pytest.fixture(params=["chroma-embedded", "chroma-http"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    quiet = ChromaSettings(anonymized_telemetry=False)
    if request.param == "chroma-embedded":
        return chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=quiet)
    port = request.getfixturevalue("chroma_port")
    return chromadb.HttpClient(host="127.0.0.1", port=port, settings=quiet)


@pytest.mark.parametrize("exact_scope_chunks", [20_000, 0], ids=["exact", "where-filter"])
def test_a_scoped_search_on_chroma_is_the_unscoped_ranking_filtered(
    client: Any,
    settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
    exact_scope_chunks: int,
) -> None:
    configured = settings.model_copy(update={"exact_scope_chunks": exact_scope_chunks})

    @settings_for_chroma
    @given(search=scoped_searches)
    def check(search: ScopedSearch) -> None:
        for collection in client.list_collections():
            client.delete_collection(collection.name)
        embedder = FakeEmbedder()
        rows = ChunkStore(open_database(f"sqlite:///{tmp_path_factory.mktemp('rows')}/c.db"))
        store = Corpus(
            rows, ChromaVectorIndex(client, embedder.model_id, embedder.dimension), embedder
        )
        retriever = build_retriever(configured, embedder, store, reranker=None)
        if exact_scope_chunks == 0:  # a page filter always takes the exact search
            search = replace(search, page_one_only=False)
        check_scoped_equals_filtered(retriever, store, embedder, search)

    check()


settings_for_chroma = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # shrinking over Chroma takes minutes
)
