"""The one-off migration of earlier-layout Chroma collections (scripts/migrate_chroma_layout.py)."""

from __future__ import annotations

from types import ModuleType

import pytest
from chroma_helpers import ingest, make_chunks

from app.config import Settings
from app.errors import EmbeddingModelMismatch
from app.services.blocks.corpus import Corpus
from app.storage.chroma_index import tenant_prefix
from testkit.indexing import build_corpus
from tests.fakes import FakeEmbedder
from tests.repo_scripts import load_script

pytestmark = pytest.mark.integration

MANUAL = [
    "Reset the router by holding the power button for ten seconds.",
    "The warranty covers manufacturing defects for two years.",
    "Firmware updates are installed from the settings page.",
]


@pytest.fixture(scope="module")
def migration() -> ModuleType:
    return load_script("migrate_chroma_layout")


@pytest.fixture
def store(settings: Settings, embedder: FakeEmbedder) -> Corpus:
    return build_corpus(settings, embedder)


def _old_layout_collection(store: Corpus, tenant: str, chunks, vectors) -> str:
    """A collection as the previous storage layout wrote it: records and texts in Chroma."""
    import hashlib

    index = store.index
    key = f"{index.model_id}\x00{index.dimension}"  # no layout in the name then
    name = tenant_prefix(tenant) + hashlib.sha256(key.encode()).hexdigest()[:12]
    old = index.client.create_collection(
        name,
        embedding_function=None,
        configuration={"hnsw": {"space": "cosine"}},
        metadata={
            "tenant_id": tenant,
            "embedding_model_id": index.model_id,
            "dimension": index.dimension,
            "corpus_version": 1,
        },
    )
    old.upsert(
        ids=[c.id for c in chunks],
        embeddings=vectors,
        documents=[c.text for c in chunks],
        metadatas=[
            {
                "tenant_id": c.tenant_id,
                "document_id": c.document_id,
                "source": c.source,
                "page": c.page,
                "page_label": c.page_label,
                "chunk_index": c.chunk_index,
                "start": c.start,
                "end": c.end,
                "section": "intro",
            }
            for c in chunks
        ],
    )
    return name


def test_a_tenant_of_the_earlier_layout_is_refused_until_migrated(store, embedder, migration):
    chunks = make_chunks("acme", "manual.txt", MANUAL)
    old_name = _old_layout_collection(store, "acme", chunks, embedder.embed_documents(MANUAL))
    ingest(store, embedder, "globex", "manual.txt", MANUAL[:1])
    refusal = r"earlier version.*scripts/migrate_chroma_layout.py --tenant acme"
    with pytest.raises(EmbeddingModelMismatch, match=refusal):
        store.count("acme")
    # A plain reindex would drop the records only Chroma has: it is refused, nothing is lost.
    with pytest.raises(EmbeddingModelMismatch, match=refusal):
        store.reindex("acme")
    assert old_name in [c.name for c in store.index.client.list_collections()]
    assert migration.legacy_tenants(store.index.client) == ["acme"]
    version = store.corpus_version("acme")

    assert migration.migrate_tenant(store.index.client, store.chunks, store, "acme") == 3

    assert store.corpus_version("acme") > version
    assert old_name not in [c.name for c in store.index.client.list_collections()]
    assert migration.legacy_tenants(store.index.client) == []
    moved = sorted(store.iter_chunks("acme"), key=lambda c: c.chunk_index)
    assert [c.text for c in moved] == MANUAL
    assert [(c.source, c.page, c.start) for c in moved] == [
        (c.source, c.page, c.start) for c in chunks
    ]
    assert moved[0].metadata == {"section": "intro"}
    assert store.count("acme") == 3
    assert (
        store.find_containing(tenant_id="acme", text="ten seconds", limit=5)[0].id == chunks[0].id
    )
    assert (
        store.query(tenant_id="acme", vector=embedder.embed_query(MANUAL[1]), k=1)[0][0].id
        == chunks[1].id
    )
    assert store.count("globex") == 1  # another tenant is untouched
    # Repeating the run finds nothing left to move.
    assert migration.migrate_tenant(store.index.client, store.chunks, store, "acme") == 0
