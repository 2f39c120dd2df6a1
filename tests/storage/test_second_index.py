"""The second dense arm's index on embedded Chroma and on a real Chroma server: it lives beside
the first arm's collection of the same tenant (another model, another dimension) without either
taking the other for a stale model, and its completeness record is seen by another client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import chromadb
import pytest
from chromadb.api import ClientAPI
from chromadb.config import Settings as ChromaSettings

from app.storage.chroma_index import ChromaVectorIndex
from app.storage.second_index import SecondVectorIndex
from app.storage.vector_index import IndexedVector
from tests.storage.test_vector_index_conformance import chroma_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.integration

QUIET = ChromaSettings(anonymized_telemetry=False)


def one_hot(dimension: int, axis: int) -> list[float]:
    return [1.0 if i == axis else 0.0 for i in range(dimension)]


@pytest.fixture(params=["chroma-embedded", "chroma-http"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ClientAPI]:
    if request.param == "chroma-embedded":
        made: ClientAPI = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=QUIET)
    else:
        port = request.getfixturevalue("chroma_server")
        made = chromadb.HttpClient(host="127.0.0.1", port=port, settings=QUIET)
    yield made
    for collection in made.list_collections():  # the server outlives the test
        made.delete_collection(collection.name)


def test_both_arms_of_a_tenant_live_side_by_side(client: ClientAPI) -> None:
    first = ChromaVectorIndex(client, "use:model", 8)
    second = SecondVectorIndex(client, "e5:model", 4)
    first.upsert("acme", [IndexedVector(f"c{i}", "doc", one_hot(8, i)) for i in range(3)])
    second.start("acme", complete=True)
    second.upsert("acme", [IndexedVector(f"c{i}", "doc", one_hot(4, i)) for i in range(3)])

    assert first.query("acme", one_hot(8, 1), 1)[0][0] == "c1"
    assert second.query("acme", one_hot(4, 2), 1)[0][0] == "c2"
    # A fresh first-arm index (another process) finds its own collection, not a "stale" one.
    assert ChromaVectorIndex(client, "use:model", 8).count("acme") == 3

    assert second.delete("acme", document_id="doc") == 3
    assert second.count("acme") == 0 and first.count("acme") == 3


def test_completeness_is_recorded_and_seen_by_another_client(client: ClientAPI) -> None:
    second = SecondVectorIndex(client, "e5:model", 4)
    assert not second.exists("acme") and not second.is_complete("acme")
    second.start("acme", complete=False)  # a tenant that had chunks before the arm
    second.upsert("acme", [IndexedVector("new", "doc2", one_hot(4, 0))])
    assert second.exists("acme") and not second.is_complete("acme")

    second.fill("acme", [[IndexedVector(f"c{i}", "doc", one_hot(4, i)) for i in range(3)]])
    other = SecondVectorIndex(client, "e5:model", 4)
    assert other.is_complete("acme")
    assert other.count("acme") == 4  # filled in place: the upload's vector stays
    # The tenant of another name is untouched.
    assert not other.is_complete("globex") and other.count("globex") == 0
