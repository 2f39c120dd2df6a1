"""Migration 0012 on a real SQLite file and a real PostgreSQL database holding today's data:
every tenant gets its `general` collection, every document lands in it, nothing is lost, and
every user's search results are the same before and after (through the scope resolver, with
and without naming `general`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from app.config import Settings
from app.retrieval.hybrid import build_retriever
from app.retrieval.scope import SearchScope
from app.services.blocks.corpus import Corpus
from app.services.collection_access import AccessResolver
from app.services.search_scope import SearchScopes
from app.storage.chunks import ChunkStore
from app.storage.collections import AccessStore
from app.storage.db import Database, open_database
from app.storage.documents import DocumentStore
from tests.fakes import FakeEmbedder
from tests.fresh_database import fresh_postgres_database
from tests.retrieval.memory_store import InMemoryVectorIndex, add_document
from tests.storage.schema_revisions import migrate_to

pytestmark = pytest.mark.integration

TEXTS = {
    "acme": {
        "pumps.txt": ["The pump needs oil every month.", "Replace the pump seal yearly."],
        "valves.txt": ["The valve is rated for 40 bar.", "Valve torque is 12 Nm."],
    },
    "globex": {"river.txt": ["The river floods in spring.", "The pump station guards the river."]},
}
QUESTIONS = ["pump oil", "valve torque bar", "river pump"]


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Database]:
    """An empty database of its own, migrated to the revision before collections (0011)."""
    if request.param == "sqlite":
        url = f"sqlite:///{data_dir / 'service.db'}"
        yield from _at_0010(url)
        return
    with fresh_postgres_database(request.getfixturevalue("postgres_url")) as url:
        yield from _at_0010(url)


def _at_0010(url: str) -> Iterator[Database]:
    database = open_database(url)  # migrates to head
    migrate_to(database, "0011")
    yield database
    database.dispose()


def _old_rows(database: Database, corpus: Corpus, embedder: FakeEmbedder) -> None:
    """Users, documents and chunks as the service wrote them before collections."""
    with database.engine.begin() as connection:
        for number, tenant in enumerate(TEXTS):
            connection.execute(
                text(
                    "INSERT INTO users (id, tenant_id, username, password_hash, created_at, role, "
                    "disabled, session_version) VALUES (:id, :tenant, :name, 'x', "
                    "'2026-12-01 10:00:00+00:00', 'member', false, 0)"
                ),
                {"id": f"usr_{number}", "tenant": tenant, "name": f"user{number}"},
            )
    for tenant, documents in TEXTS.items():
        for source, texts in documents.items():
            chunks = add_document(corpus, embedder, tenant, source, texts)
            with database.engine.begin() as connection:
                connection.execute(
                    text(
                        "INSERT INTO documents (tenant_id, document_id, source, status, pages, "
                        "chunks, ocr_pages, size_bytes, content_sha256, uploaded_at, updated_at) "
                        "VALUES (:tenant, :doc, :source, 'done', 2, 2, 0, 10, :sha, "
                        "'2026-12-01 10:00:00+00:00', '2026-12-01 10:00:00+00:00')"
                    ),
                    {
                        "tenant": tenant,
                        "doc": chunks[0].document_id,
                        "source": source,
                        "sha": "0" * 64,
                    },
                )


def _results(retriever: object, tenant: str, scope: SearchScope) -> list[list[tuple[str, float]]]:
    return [
        [
            (hit.chunk.id, round(hit.score, 9))
            for hit in retriever.search(tenant, q, 4, scope=scope).hits
        ]  # type: ignore[attr-defined]
        for q in QUESTIONS
    ]


def test_every_document_lands_in_general_and_every_result_stays_the_same(
    database: Database, settings: Settings
) -> None:
    embedder = FakeEmbedder()
    corpus = Corpus(ChunkStore(database), InMemoryVectorIndex(embedder.dimension), embedder)
    retriever = build_retriever(settings, embedder, corpus, reranker=None)
    _old_rows(database, corpus, embedder)
    before = {tenant: _results(retriever, tenant, SearchScope()) for tenant in TEXTS}

    migrate_to(database, "head")

    store = AccessStore(database)
    resolver = AccessResolver(store)
    scopes = SearchScopes(store, corpus.corpus_version, retriever.scoped.owners)
    for number, tenant in enumerate(TEXTS):
        graph = store.graph(tenant)
        assert {c: (r.name, r.visibility) for c, r in graph.collections.items()} == {
            "general": ("general", "tenant")
        }
        documents = DocumentStore(database).list(tenant, 50)
        assert len(documents) == len(TEXTS[tenant])
        assert {d.collection_id for d in documents} == {"general"}
        assert {d.metadata_json for d in documents} == {"{}"}
        access = resolver.resolve(tenant_id=tenant, user_id=f"usr_{number}", role="member")
        assert access.reads_everything and access.permissions == {"general": "write"}
        everything = scopes.resolve(access)
        assert everything.unrestricted and everything.key == "all"  # the cache keys of before
        assert scopes.resolve(access, ["general"]).unrestricted  # naming all of it: the same
        # The scoped path (filters inside both arms) over every document ranks as before too.
        by_documents = SearchScope(frozenset(d.document_id for d in documents), key="general")
        assert _results(retriever, tenant, everything) == before[tenant]
        assert _results(retriever, tenant, by_documents) == before[tenant]
    # The downgrade takes it all back, and the upgrade brings it again.
    migrate_to(database, "0011")
    migrate_to(database, "head")
    assert set(AccessStore(database).graph("acme").collections) == {"general"}
