"""The conformance suite every `VectorIndex` backend must pass, and the corpus service over each.

Backends: Chroma embedded (a persistent directory), Chroma over HTTP (a real `chroma run` server
started for this module) and the in-memory index the retrieval unit tests use. Adding a backend
means adding it to `BACKENDS` and `index` below.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import chromadb
import pytest
from chroma_helpers import make_chunks
from chromadb.config import Settings as ChromaSettings

from app.services.blocks.corpus import Corpus
from app.storage.chroma_index import ChromaVectorIndex
from app.storage.chunks import ChunkStore
from app.storage.db import open_database
from app.storage.vector_index import IndexedVector, VectorIndex
from testkit.local_stack import chroma_server as running_chroma
from tests.fakes import FakeEmbedder
from tests.retrieval.memory_store import InMemoryVectorIndex

pytestmark = pytest.mark.integration

DIM = FakeEmbedder().dimension  # so the corpus service can run over the same index
MODEL = FakeEmbedder().model_id
BACKENDS = ["memory", "chroma-embedded", "chroma-http"]


def vec(*head: float) -> list[float]:
    """A DIM-long vector starting with `head`, zeros after."""
    return [*head] + [0.0] * (DIM - len(head))


def at_angle(degrees: float, length: float = 1.0) -> list[float]:
    """A vector in the plane of the first two axes, `degrees` from the first axis."""
    rad = math.radians(degrees)
    return vec(length * math.cos(rad), length * math.sin(rad))


def entries(document_id: str, vectors: dict[str, list[float]]) -> list[IndexedVector]:
    return [IndexedVector(cid, document_id, vector) for cid, vector in vectors.items()]


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A real Chroma server (`chroma run`) on a free port, for this module's HTTP backend."""
    with running_chroma(tmp_path_factory.mktemp("chroma-server")) as port:
        yield port


@pytest.fixture(params=BACKENDS)
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    """A fresh, empty index of each backend."""
    if request.param == "memory":
        yield InMemoryVectorIndex(DIM)
        return
    quiet = ChromaSettings(anonymized_telemetry=False)
    if request.param == "chroma-embedded":
        client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=quiet)
    else:
        port = request.getfixturevalue("chroma_server")
        client = chromadb.HttpClient(host="127.0.0.1", port=port, settings=quiet)
    yield ChromaVectorIndex(client, MODEL, DIM)
    for collection in client.list_collections():  # the server outlives the test
        client.delete_collection(collection.name)


# --- the index alone ---


def test_upserting_the_same_ids_again_keeps_one_copy(index: VectorIndex) -> None:
    first = entries("d1", {"a": vec(1), "b": vec(0, 1), "c": vec(0, 0, 1)})
    index.upsert("acme", first)
    index.upsert("acme", first)

    assert index.count("acme") == 3
    ids = [cid for cid, _ in index.query("acme", vec(1, 1, 1), k=10)]
    assert sorted(ids) == ["a", "b", "c"]


def test_an_upsert_overwrites_the_vector_of_an_id(index: VectorIndex) -> None:
    index.upsert("acme", entries("d1", {"a": vec(1), "b": vec(0, 1)}))
    index.upsert("acme", entries("d1", {"a": vec(0, 0, 1)}))

    (best, score), *_ = index.query("acme", vec(0, 0, 1), k=1)
    assert (best, round(score, 4)) == ("a", 1.0)
    assert index.count("acme") == 2


def test_replacing_a_document_leaves_no_stale_vector(index: VectorIndex) -> None:
    index.upsert("acme", entries("d1", {"a": vec(1), "b": vec(0, 1), "c": vec(0, 0, 1)}))
    index.upsert("acme", entries("d2", {"x": vec(1, 1)}))
    # What the corpus service does: upsert the new version, then delete the ids it dropped.
    index.upsert("acme", entries("d1", {"a": vec(1), "d": vec(0, 0, 0, 1)}))
    assert index.delete("acme", chunk_ids=["b", "c"]) == 2

    ids = {cid for cid, _ in index.query("acme", vec(1, 1, 1, 1), k=10)}
    assert ids == {"a", "d", "x"}
    assert index.count("acme") == 3


def test_delete_counts_what_it_removed(index: VectorIndex) -> None:
    index.upsert("acme", entries("d1", {"a": vec(1), "b": vec(0, 1)}))
    index.upsert("acme", entries("d2", {"c": vec(0, 0, 1), "e": vec(0, 0, 0, 1)}))

    assert index.delete("acme", chunk_ids=["a", "unknown"]) == 1
    assert index.delete("acme", chunk_ids=["a"]) == 0
    # Both selectors at once count each vector once.
    assert index.delete("acme", chunk_ids=["c"], document_id="d2") == 2
    assert index.delete("acme", document_id="d2") == 0
    assert index.delete("acme", document_id="no-such-document") == 0
    assert [cid for cid, _ in index.query("acme", vec(1, 1), k=10)] == ["b"]
    assert index.count("acme") == 1


def test_a_query_never_returns_another_tenants_vector(index: VectorIndex) -> None:
    index.upsert("acme", entries("d1", {"acme-1": at_angle(80), "acme-2": at_angle(90)}))
    # globex holds the exact query vector, and a document with the same id as acme's.
    index.upsert("globex", entries("d1", {"globex-1": at_angle(0), "globex-2": at_angle(5)}))

    hits = index.query("acme", at_angle(0), k=10)

    assert [cid for cid, _ in hits] == ["acme-1", "acme-2"]
    assert index.delete("acme", document_id="d1") == 2
    assert index.query("acme", at_angle(0), k=10) == []
    assert index.count("globex") == 2
    assert [cid for cid, _ in index.query("globex", at_angle(0), k=1)] == ["globex-1"]


def test_query_orders_by_cosine_similarity_best_first(index: VectorIndex) -> None:
    # Lengths differ on purpose: cosine ignores them, an L2 index would not.
    angles = {
        "a0": (0, 5.0),
        "a30": (30, 0.2),
        "a60": (60, 3.0),
        "a90": (90, 1.0),
        "a180": (180, 9),
    }
    index.upsert("acme", entries("d1", {cid: at_angle(a, n) for cid, (a, n) in angles.items()}))

    hits = index.query("acme", at_angle(0, 2.0), k=5)

    assert [cid for cid, _ in hits] == ["a0", "a30", "a60", "a90", "a180"]
    assert [round(score, 3) for _, score in hits] == [1.0, 0.866, 0.5, 0.0, -1.0]


def test_k_larger_than_the_tenant_returns_everything_it_has(index: VectorIndex) -> None:
    index.upsert("acme", entries("d1", {"a": vec(1), "b": vec(0, 1)}))
    index.upsert("globex", entries("d1", {"g": vec(1)}))

    assert sorted(cid for cid, _ in index.query("acme", vec(1), k=50)) == ["a", "b"]


def test_a_filtered_query_returns_k_of_those_documents_in_order(index: VectorIndex) -> None:
    """The document filter is applied inside the search: the k nearest vectors of the chosen
    documents come back even when every vector of another document is nearer."""
    index.upsert("acme", entries("near", {f"n{i}": at_angle(i) for i in range(12)}))
    index.upsert("acme", entries("far", {f"f{i}": at_angle(40 + 5 * i) for i in range(6)}))
    index.upsert("acme", entries("other", {"o1": at_angle(47)}))

    hits = index.query("acme", at_angle(0), k=4, documents=frozenset({"far", "other"}))
    assert [cid for cid, _ in hits] == ["f0", "f1", "o1", "f2"]
    assert [round(score, 4) for _, score in hits] == [
        round(math.cos(math.radians(a)), 4) for a in (40, 45, 47, 50)
    ]
    assert index.query("acme", at_angle(0), k=4, documents=frozenset()) == []
    assert index.query("acme", at_angle(0), k=4, documents=frozenset({"nothing"})) == []
    # Another tenant's document of the same id is never in the filter's reach.
    index.upsert("globex", entries("far", {"g1": at_angle(0)}))
    assert "g1" not in {cid for cid, _ in index.query("acme", at_angle(0), 10, frozenset({"far"}))}


def test_the_exact_search_among_chunks_ranks_every_one_of_them(index: VectorIndex) -> None:
    index.upsert("acme", entries("d1", {f"c{i}": at_angle(3 * i) for i in range(30)}))
    index.upsert("globex", entries("d1", {"c29": at_angle(0)}))

    hits = index.nearest_among("acme", at_angle(90), 3, ["c0", "c5", "c29", "unknown"])
    assert [cid for cid, _ in hits] == ["c29", "c5", "c0"]
    assert round(hits[0][1], 4) == round(math.cos(math.radians(3)), 4)
    assert index.nearest_among("acme", at_angle(0), 3, []) == []


def test_the_exact_search_among_chunks_sees_a_vector_written_again_under_its_id(
    index: VectorIndex,
) -> None:
    """A chunk id written again with another vector (a re-upload whose embedded section path
    changed) is ranked by the new vector, however recently its scope was searched."""
    index.upsert("acme", entries("d1", {f"c{i}": at_angle(3 * i) for i in range(30)}))
    scope = [f"c{i}" for i in range(30)]
    assert index.nearest_among("acme", at_angle(90), 1, scope)[0][0] == "c29"  # 87 degrees
    index.upsert("acme", entries("d1", {"c20": at_angle(90)}))

    assert index.nearest_among("acme", at_angle(90), 1, scope)[0][0] == "c20"


def test_a_scope_an_upload_grew_fetches_only_the_new_vectors(tmp_path: Path) -> None:
    """After an upload into a searched scope, the next exact search reads back only the new
    chunks' vectors (the others are kept from the scope before) and ranks like a fresh index."""
    quiet = ChromaSettings(anonymized_telemetry=False)
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=quiet)
    index = ChromaVectorIndex(client, MODEL, DIM)
    index.upsert("acme", entries("d1", {f"c{i}": at_angle(3 * i) for i in range(30)}))
    scope = [f"c{i}" for i in range(30)]
    index.nearest_among("acme", at_angle(46), 5, scope)
    assert index.vectors_fetched == 30

    index.upsert("acme", entries("d2", {"n1": at_angle(46.5), "n2": at_angle(120)}))
    grown = [*scope, "n1", "n2"]
    hits = index.nearest_among("acme", at_angle(46), 5, grown)
    assert index.vectors_fetched == 32  # the two new ones only

    fresh = ChromaVectorIndex(client, MODEL, DIM)
    assert hits == fresh.nearest_among("acme", at_angle(46), 5, grown)
    assert [cid for cid, _ in hits[:2]] == ["n1", "c15"]  # half a degree and one away


def test_an_empty_tenant_has_nothing(index: VectorIndex) -> None:
    index.upsert("globex", entries("d1", {"g": vec(1)}))

    assert index.count("acme") == 0
    assert index.query("acme", vec(1), k=3) == []
    assert index.delete("acme", chunk_ids=["g"], document_id="d1") == 0
    assert index.count("globex") == 1


def test_count_follows_upserts_and_deletes(index: VectorIndex) -> None:
    assert index.count("acme") == 0
    index.upsert("acme", entries("d1", {f"c{i}": vec(1, i) for i in range(7)}))
    assert index.count("acme") == 7
    index.upsert("acme", entries("d2", {"x": vec(0, 1)}))
    assert index.count("acme") == 8
    index.delete("acme", document_id="d1")
    assert index.count("acme") == 1


def test_bad_input_is_refused(index: VectorIndex) -> None:
    with pytest.raises(ValueError, match="k must be positive"):
        index.query("acme", vec(1), k=0)
    with pytest.raises(ValueError, match="length 3"):
        index.upsert("acme", entries("d1", {"a": [0.1, 0.2, 0.3]}))
    with pytest.raises(ValueError, match="length 3"):
        index.query("acme", [0.1, 0.2, 0.3], k=1)
    with pytest.raises(ValueError, match="tenant_id"):
        index.count(" ")
    assert index.count("acme") == 0


def test_rebuild_reads_nothing_when_the_vectors_are_current(index: VectorIndex) -> None:
    index.upsert("acme", entries("d1", {"a": vec(1)}))
    read = []

    def pages() -> Iterator[list[IndexedVector]]:
        read.append(True)
        yield entries("d1", {"a": vec(1)})

    assert index.rebuild("acme", pages()) is False
    assert read == [] and index.count("acme") == 1


# --- the corpus service over each backend ---


@pytest.fixture
def corpus(index: VectorIndex, tmp_path: Path) -> Corpus:
    database = open_database(f"sqlite:///{tmp_path / 'chunks.db'}")
    return Corpus(ChunkStore(database), index, FakeEmbedder())


def test_the_corpus_replaces_and_deletes_documents_on_every_backend(corpus: Corpus) -> None:
    embedder = FakeEmbedder()
    old = make_chunks("acme", "manual.txt", ["valve one", "valve two", "valve three"])
    corpus.replace_documents(
        tenant_id="acme",
        documents=[(old[0].document_id, old, embedder.embed_documents([c.text for c in old]))],
    )
    corpus.replace_documents(
        tenant_id="acme",
        documents=[(old[0].document_id, old, embedder.embed_documents([c.text for c in old]))],
    )  # re-ingesting the same file
    assert corpus.count("acme") == 3
    new = make_chunks("acme", "manual.txt", ["valve one", "a new second step"])
    corpus.replace_documents(
        tenant_id="acme",
        documents=[(new[0].document_id, new, embedder.embed_documents([c.text for c in new]))],
    )

    hits = corpus.query(tenant_id="acme", vector=embedder.embed_query("valve"), k=10)
    assert sorted(c.id for c, _ in hits) == sorted(c.id for c in new)
    assert corpus.count("acme") == 2
    assert corpus.delete_document(tenant_id="acme", document_id=new[0].document_id) == 2
    assert corpus.count("acme") == 0 and corpus.chunk_ids("acme") == []
