"""The corpus service over a real Chroma directory and SQLite rows (fake embedder for speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from chroma_helpers import ingest, make_chunks

from app.config import Settings
from app.domain import document_id
from app.services.blocks.corpus import Corpus
from app.storage import chroma_index
from app.storage import chunks as chunks_module
from app.storage.chroma_index import collection_name
from app.storage.vector_index import IndexedVector
from testkit.indexing import build_corpus
from tests.fakes import FakeEmbedder

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

MANUAL = [
    "Reset the router by holding the power button for ten seconds.",
    "The warranty covers manufacturing defects for two years.",
    "Firmware updates are installed from the settings page.",
]
RECIPES = [
    "Knead the dough for eight minutes until it is smooth.",
    "Bake the bread at 220 degrees for thirty minutes.",
]


@pytest.fixture
def store(settings: Settings, embedder: FakeEmbedder) -> Corpus:
    return build_corpus(settings, embedder)


def test_reingesting_the_same_document_keeps_the_count(store, embedder):
    ingest(store, embedder, "acme", "manual.pdf", MANUAL)
    ingest(store, embedder, "acme", "manual.pdf", MANUAL)

    assert store.count("acme") == len(MANUAL)


def test_changed_document_leaves_no_chunk_of_the_old_version(store, embedder):
    old = ingest(store, embedder, "acme", "manual.pdf", MANUAL)
    ingest(store, embedder, "acme", "recipes.txt", RECIPES)
    new_text = [MANUAL[0], "The warranty now covers accidental damage for three years."]

    new = ingest(store, embedder, "acme", "manual.pdf", new_text)

    remaining = {c.id for c in store.iter_chunks("acme")}
    assert remaining == {c.id for c in new} | {
        c.id for c in make_chunks("acme", "recipes.txt", RECIPES)
    }
    assert not {old[1].id, old[2].id} & remaining
    assert store.find_containing(tenant_id="acme", text="two years", limit=10) == []


def test_delete_removes_every_chunk_of_that_document_only(store, embedder):
    ingest(store, embedder, "acme", "manual.pdf", MANUAL)
    ingest(store, embedder, "acme", "recipes.txt", RECIPES)

    removed = store.delete_document(tenant_id="acme", document_id=document_id("acme", "manual.pdf"))

    assert removed == len(MANUAL)
    assert {c.source for c in store.iter_chunks("acme")} == {"recipes.txt"}
    assert (
        store.delete_document(tenant_id="acme", document_id=document_id("acme", "manual.pdf")) == 0
    )


def test_a_delete_the_vector_store_refuses_removes_nothing_until_it_is_retried(
    store, embedder, monkeypatch
):
    chunks = ingest(store, embedder, "acme", "manual.pdf", MANUAL)
    doc = document_id("acme", "manual.pdf")

    def unreachable(*args, **kwargs):
        raise httpx.ConnectError("[Errno 111] Connection refused")

    with monkeypatch.context() as patch:  # the Chroma server restarting
        patch.setattr(store.index, "delete", unreachable)
        with pytest.raises(httpx.ConnectError):
            store.delete_document(tenant_id="acme", document_id=doc)
    # The client was told to retry (503); meanwhile the document is whole, not a listed
    # document whose chunks are gone.
    assert sorted(store.chunk_ids("acme")) == sorted(c.id for c in chunks)
    hits = store.query(tenant_id="acme", vector=embedder.embed_query(MANUAL[1]), k=1)
    assert [chunk.text for chunk, _ in hits] == [MANUAL[1]]

    assert store.delete_document(tenant_id="acme", document_id=doc) == len(MANUAL)
    assert store.chunk_ids("acme") == [] and store.count("acme") == 0


def test_tenants_never_see_each_others_chunks(store, embedder):
    acme = ingest(store, embedder, "acme", "manual.pdf", MANUAL)
    globex = ingest(store, embedder, "globex", "recipes.txt", RECIPES)

    # A query that matches globex's text exactly, asked as acme, must return only acme's chunks.
    hits = store.query(tenant_id="acme", vector=embedder.embed_query(RECIPES[1]), k=10)
    assert hits and {chunk.tenant_id for chunk, _ in hits} == {"acme"}
    assert store.find_containing(tenant_id="acme", text="Bake the bread", limit=10) == []
    assert store.get_chunks(tenant_id="acme", ids=[c.id for c in globex]) == []
    assert {c.id for c in store.iter_chunks("globex")} == {c.id for c in globex}
    assert store.count("acme") == len(acme)


def test_metadata_round_trips_exactly(store, embedder):
    text = "الفصل الأول: مقدمة عن الشبكات"
    chunk = replace(
        make_chunks("acme", "كتاب.pdf", [text], page=1, label="iv")[0],
        start=17,
        end=17 + len(text),
        metadata={"kind": "text", "language": "ar"},
    )
    store.replace_documents(
        tenant_id="acme", documents=[(chunk.document_id, [chunk], embedder.embed_documents([text]))]
    )

    (hit, score), *_ = store.query(tenant_id="acme", vector=embedder.embed_query(text), k=1)

    assert hit == chunk
    assert (hit.page, hit.page_label, hit.start, hit.end) == (1, "iv", 17, 17 + len(text))
    assert hit.metadata == {"kind": "text", "language": "ar"}
    assert hit.text == text
    assert score == pytest.approx(1.0, abs=1e-5)


def test_similarity_is_one_minus_cosine_distance(store, embedder):
    dim = embedder.dimension
    chunks = make_chunks("acme", "axes.txt", ["x axis", "y axis"])
    x_axis = [1.0] + [0.0] * (dim - 1)
    y_axis = [0.0, 1.0] + [0.0] * (dim - 2)
    store.replace_documents(
        tenant_id="acme", documents=[(chunks[0].document_id, chunks, [x_axis, y_axis])]
    )

    # Unnormalised query at 45 degrees between them: cosine is 0.7071 for both, whatever its length.
    hits = store.query(tenant_id="acme", vector=[3.0, 3.0] + [0.0] * (dim - 2), k=2)

    assert [round(score, 4) for _, score in hits] == [0.7071, 0.7071]
    collection = store.index.client.get_collection(store.index.collection_name("acme"))
    assert collection.configuration["hnsw"]["space"] == "cosine"


def test_query_returns_best_first_and_at_most_what_exists(store, embedder):
    ingest(store, embedder, "acme", "manual.pdf", MANUAL)

    hits = store.query(
        tenant_id="acme", vector=embedder.embed_query("how long is the warranty"), k=50
    )

    assert len(hits) == len(MANUAL)
    assert "warranty" in hits[0][0].text
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)


def test_find_containing_is_exact_case_sensitive_and_limited(store, embedder):
    ingest(store, embedder, "acme", "manual.pdf", MANUAL)

    assert [
        c.text for c in store.find_containing(tenant_id="acme", text="power button", limit=10)
    ] == [MANUAL[0]]
    assert store.find_containing(tenant_id="acme", text="Power Button", limit=10) == []
    assert len(store.find_containing(tenant_id="acme", text="the", limit=2)) == 2
    assert store.find_containing(tenant_id="acme", text="", limit=10) == []


def test_get_chunks_keeps_the_requested_order_and_skips_unknown_ids(store, embedder):
    chunks = ingest(store, embedder, "acme", "manual.pdf", MANUAL)
    wanted = [chunks[2].id, "no-such-id", chunks[0].id]

    assert [c.id for c in store.get_chunks(tenant_id="acme", ids=wanted)] == [
        chunks[2].id,
        chunks[0].id,
    ]


def test_iter_chunks_and_chunk_ids_page_through_large_tenants(store, embedder, monkeypatch):
    monkeypatch.setattr(chroma_index, "PAGE_SIZE", 7)
    monkeypatch.setattr(chunks_module, "PAGE_SIZE", 7)
    texts = [f"paragraph number {i} about topic {i % 5}" for i in range(23)]

    chunks = ingest(store, embedder, "acme", "long.txt", texts)

    assert sorted(c.id for c in store.iter_chunks("acme")) == sorted(c.id for c in chunks)
    assert sorted(store.chunk_ids("acme")) == sorted(c.id for c in chunks)
    assert store.count("acme") == 23
    ingest(store, embedder, "globex", "other.txt", ["another tenant's paragraph"])
    assert len(store.chunk_ids("acme")) == 23 and len(store.chunk_ids("globex")) == 1


def test_unknown_tenant_reads_empty_without_creating_a_collection(store, embedder):
    assert store.count("nobody") == 0
    assert store.query(tenant_id="nobody", vector=embedder.embed_query("x"), k=3) == []
    assert list(store.iter_chunks("nobody")) == []
    assert store.chunk_ids("nobody") == []
    assert store.corpus_version("nobody") == 0
    assert store.index.client.list_collections() == []


def test_bad_input_is_refused(store, embedder):
    chunks = make_chunks("acme", "manual.pdf", MANUAL)
    vectors = embedder.embed_documents(MANUAL)
    doc = chunks[0].document_id

    with pytest.raises(ValueError, match="3 chunks but 2 vectors"):
        store.replace_documents(tenant_id="acme", documents=[(doc, chunks, vectors[:2])])
    with pytest.raises(ValueError, match="does not belong"):
        store.replace_documents(
            tenant_id="globex", documents=[(document_id("globex", "manual.pdf"), chunks, vectors)]
        )
    with pytest.raises(ValueError, match="length 3"):
        store.replace_documents(tenant_id="acme", documents=[(doc, chunks[:1], [[0.1, 0.2, 0.3]])])
    with pytest.raises(ValueError, match="k must be positive"):
        store.query(tenant_id="acme", vector=vectors[0], k=0)
    with pytest.raises(ValueError, match="tenant_id"):
        store.count("")
    assert store.count("acme") == 0


def test_corpus_version_changes_on_every_write(store, embedder):
    versions = [store.corpus_version("acme")]
    ingest(store, embedder, "acme", "manual.pdf", MANUAL)
    versions.append(store.corpus_version("acme"))
    ingest(store, embedder, "acme", "manual.pdf", MANUAL[:2])
    versions.append(store.corpus_version("acme"))
    store.delete_document(tenant_id="acme", document_id=document_id("acme", "manual.pdf"))
    versions.append(store.corpus_version("acme"))

    assert versions == sorted(set(versions)), versions


def test_corpus_version_is_seen_by_another_client_and_process(settings, embedder):
    writer = build_corpus(settings, embedder)
    ingest(writer, embedder, "acme", "manual.pdf", MANUAL)
    reader = build_corpus(settings, embedder)
    before = reader.corpus_version("acme")  # the reader now holds the collection open

    ingest(writer, embedder, "acme", "recipes.txt", RECIPES)

    after = reader.corpus_version("acme")
    assert after != before and after == writer.corpus_version("acme")
    data_dir = str(settings.data_dir)
    script = (
        "import json; from app.config import load_settings;"
        "from tests.fakes import FakeEmbedder;"
        "from testkit.indexing import build_corpus;"
        f"s = build_corpus(load_settings(_env_file=None, data_dir={data_dir!r}),"
        " FakeEmbedder());"
        "print(json.dumps([s.corpus_version('acme'), s.count('acme')]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [after, len(MANUAL) + len(RECIPES)]


def test_collection_names_separate_tenants_models_and_dimensions():
    names = {
        collection_name("acme", "use:m", 512),
        collection_name("globex", "use:m", 512),
        collection_name("acme", "e5:m", 512),
        collection_name("acme", "use:m", 256),
    }
    assert len(names) == 4
    assert all(name.replace("_", "").isalnum() and len(name) < 64 for name in names)


def test_a_foreign_chunk_in_a_tenant_collection_is_never_returned(store, embedder):
    """Defence in depth: even if a bug wrote another tenant's vector into this collection."""
    ingest(store, embedder, "acme", "manual.txt", MANUAL)
    intruder = ingest(store, embedder, "globex", "secret.txt", ["The router password is hunter2."])
    collection = store.index._collection("acme", create=False)
    assert collection is not None
    collection.upsert(
        ids=[intruder[0].id],
        embeddings=embedder.embed_documents([intruder[0].text]),
        metadatas=[{"tenant_id": "globex", "document_id": intruder[0].document_id}],
    )
    vector = embedder.embed_query("router password hunter2")
    hits = store.query(tenant_id="acme", vector=vector, k=10)
    assert hits and all(chunk.tenant_id == "acme" for chunk, _ in hits)
    assert "hunter2" not in " ".join(chunk.text for chunk, _ in hits)
    assert store.get_chunks(tenant_id="acme", ids=[intruder[0].id]) == []
    assert [c.text for c, _ in store.query(tenant_id="globex", vector=vector, k=10)] == [
        intruder[0].text
    ]


def test_chroma_holds_only_vectors_and_the_keys_deletes_filter_on(store, embedder):
    chunks = ingest(store, embedder, "acme", "manual.txt", MANUAL)
    raw = store.index._collection("acme", create=False).get(include=["documents", "metadatas"])
    assert sorted(raw["ids"]) == sorted(c.id for c in chunks)
    assert raw["documents"] == [None] * len(chunks)
    assert {tuple(sorted(m)) for m in raw["metadatas"]} == {("document_id", "tenant_id")}
    assert store.get_chunks(tenant_id="acme", ids=[chunks[1].id]) == [chunks[1]]


def test_replace_and_delete_remove_the_records_with_the_vectors(store, embedder):
    doc = document_id("acme", "manual.txt")
    ingest(store, embedder, "acme", "manual.txt", MANUAL)
    new = ingest(store, embedder, "acme", "manual.txt", [*MANUAL[:1], "A new second step."])
    assert sorted(store.chunk_ids("acme")) == sorted(c.id for c in new)
    assert store.count("acme") == 2  # the old version's vectors are gone too
    ingest(store, embedder, "globex", "manual.txt", MANUAL)
    assert store.delete_document(tenant_id="acme", document_id=doc) == 2
    assert store.chunk_ids("acme") == [] and store.count("acme") == 0
    assert len(store.chunk_ids("globex")) == 3


def test_a_vector_whose_row_was_never_written_is_not_returned(store, embedder):
    chunks = ingest(store, embedder, "acme", "manual.txt", MANUAL)
    # As if a crash came between the vector upsert and the rows' transaction.
    orphan = make_chunks("acme", "crashed.txt", ["Half-written upload about the router."])
    vector = embedder.embed_documents([orphan[0].text])[0]
    store.index.upsert("acme", [IndexedVector(orphan[0].id, orphan[0].document_id, vector)])
    hits = store.query(tenant_id="acme", vector=embedder.embed_query(orphan[0].text), k=10)
    assert sorted(c.id for c, _ in hits) == sorted(c.id for c in chunks)
    assert store.get_chunks(tenant_id="acme", ids=[orphan[0].id]) == []
    # Uploading it again completes it.
    ingest(store, embedder, "acme", "crashed.txt", [orphan[0].text])
    assert (
        store.query(tenant_id="acme", vector=embedder.embed_query(orphan[0].text), k=1)[0][0].id
        == orphan[0].id
    )
