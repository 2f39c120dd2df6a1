"""The migration that makes a document one name in one collection, on a real SQLite file and a
real PostgreSQL database holding data of the revision before it: every document keeps its id
(so its chunk ids, citations and URLs), a re-upload of its name to its collection finds it, the
same name is another document in another collection, and every existing job is an `index` job.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from app.domain import document_id
from app.jobs.store import JobStore
from app.storage.db import Database
from app.storage.documents import DocumentStore
from tests.storage.schema_revisions import database_at, migrate_to

pytestmark = pytest.mark.integration

BEFORE = "0014"
T = "acme"
NOW = "2026-12-01 10:00:00+00:00"


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Database]:
    """An empty database of its own, at the revision before document identity per collection."""
    yield from database_at(BEFORE, request, data_dir)


def _old_rows(database: Database) -> dict[str, str]:
    """Documents as the service wrote them before (ids from tenant and name), one moved to
    another collection, and a finished upload's job; source -> document id."""
    ids = {source: document_id(T, source) for source in ("handbook.pdf", "minutes.txt")}
    with database.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO collections (tenant_id, collection_id, name, description, "
                "visibility, created_at, updated_at) VALUES (:t, 'col_0123456789ab', 'hr', '', "
                "'restricted', :now, :now)"
            ),
            {"t": T, "now": NOW},
        )
        for source, doc in ids.items():
            connection.execute(
                text(
                    "INSERT INTO documents (tenant_id, document_id, source, status, pages, chunks, "
                    "ocr_pages, size_bytes, content_sha256, uploaded_at, updated_at, "
                    "collection_id) VALUES (:t, :doc, :source, 'done', 1, 1, 0, 10, :sha, :now, "
                    ":now, :collection)"
                ),
                {
                    "t": T,
                    "doc": doc,
                    "source": source,
                    "sha": "0" * 64,
                    "now": NOW,
                    "collection": "col_0123456789ab" if source == "minutes.txt" else "general",
                },
            )
        connection.execute(
            text(
                "INSERT INTO jobs (job_id, tenant_id, document_id, source, stored_path, "
                "size_bytes, status, progress_done, progress_total, progress_stage, "
                "chunks_indexed, pages, attempts, created_at, updated_at) VALUES ('job_old', "
                ":t, :doc, 'handbook.pdf', '', 10, 'done', 1, 1, 'done', 1, 1, 1, :now, :now)"
            ),
            {"t": T, "doc": ids["handbook.pdf"], "now": NOW},
        )
    return ids


def test_every_document_keeps_its_id_and_a_name_is_unique_per_collection(
    database: Database,
) -> None:
    ids = _old_rows(database)

    migrate_to(database, "head")

    documents = DocumentStore(database)
    assert {d.source: d.document_id for d in documents.list(T, 10)} == ids
    # A re-upload of a name to the collection that holds it is that document.
    assert documents.identify(T, "general", "handbook.pdf") == ids["handbook.pdf"]
    assert documents.identify(T, "col_0123456789ab", "minutes.txt") == ids["minutes.txt"]
    # The same name in another collection is another document; in general, the id of the
    # moved one is taken, so the new one gets a variant of it.
    elsewhere = documents.identify(T, "col_0123456789ab", "handbook.pdf")
    assert elsewhere == document_id(T, "handbook.pdf", "col_0123456789ab")
    fresh = documents.identify(T, "general", "minutes.txt")
    assert fresh not in ids.values() and fresh.startswith("doc_")
    with pytest.raises(IntegrityError), database.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO documents (tenant_id, document_id, source, status, pages, chunks, "
                "ocr_pages, size_bytes, content_sha256, uploaded_at, updated_at, collection_id) "
                "VALUES (:t, 'doc_twin', 'handbook.pdf', 'done', 1, 1, 0, 10, :sha, :now, :now, "
                "'general')"
            ),
            {"t": T, "sha": "0" * 64, "now": NOW},
        )
    old_job = JobStore(database).get(T, "job_old")
    assert old_job is not None and old_job.kind == "index" and old_job.collection_id is None

    # The downgrade takes it back (names unique per tenant again), and the upgrade again.
    migrate_to(database, BEFORE)
    migrate_to(database, "head")
    assert {d.source: d.document_id for d in DocumentStore(database).list(T, 10)} == ids
