"""The documents table on SQLite and PostgreSQL: one row per name, paging, tenant scoping."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import event, update

from app.domain import document_id
from app.storage.db import Database
from app.storage.documents import DocumentStore
from app.storage.tables import DocumentRow
from tests.queued_jobs import mark_indexed

pytestmark = pytest.mark.integration


@pytest.fixture
def documents(sql_database: Database) -> DocumentStore:
    return DocumentStore(sql_database)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def add(documents: DocumentStore, tenant: str, source: str, content: str = "v1") -> str:
    doc_id = document_id(tenant, source)
    documents.upsert(tenant, doc_id, source, len(content), sha(content))
    return doc_id


def test_upload_creates_a_queued_document_visible_to_its_tenant_only(
    documents: DocumentStore,
) -> None:
    doc_id = add(documents, "acme", "handbook.pdf")
    doc = documents.get("acme", doc_id)
    assert doc is not None
    assert (doc.source, doc.status, doc.pages, doc.chunks, doc.size_bytes) == (
        "handbook.pdf",
        "queued",
        0,
        0,
        2,
    )
    assert doc.content_sha256 == sha("v1")
    assert doc.uploaded_at.tzinfo is not None
    assert documents.get("globex", doc_id) is None
    assert documents.list("globex", limit=10) == []


def test_reupload_of_the_same_name_replaces_the_row(documents: DocumentStore) -> None:
    doc_id = add(documents, "acme", "handbook.pdf", "v1")
    mark_indexed(documents, "acme", doc_id, pages=3, chunks=12)
    first = documents.get("acme", doc_id)
    assert first is not None

    add(documents, "acme", "handbook.pdf", "version two")
    second = documents.get("acme", doc_id)
    assert second is not None
    assert documents.count("acme") == 1
    assert (second.status, second.size_bytes, second.content_sha256) == (
        "queued",
        len("version two"),
        sha("version two"),
    )
    assert second.uploaded_at > first.uploaded_at
    # Until the new version is indexed, the figures describe what search can still find.
    assert (second.pages, second.chunks) == (3, 12)


def test_same_name_in_two_tenants_is_two_documents(documents: DocumentStore) -> None:
    acme, globex = add(documents, "acme", "plan.txt"), add(documents, "globex", "plan.txt")
    assert acme != globex
    mark_indexed(documents, "acme", acme, pages=1, chunks=4)
    assert documents.get("globex", globex).status == "queued"  # type: ignore[union-attr]


def test_status_update_reports_a_document_deleted_meanwhile(documents: DocumentStore) -> None:
    doc_id = add(documents, "acme", "gone.txt")
    assert documents.set_status("acme", doc_id, "processing") is True
    assert documents.set_status("globex", doc_id, "failed") is False  # another tenant's
    assert documents.get("acme", doc_id).status == "processing"  # type: ignore[union-attr]
    documents.delete("acme", doc_id)
    assert documents.set_status("acme", doc_id, "done") is False
    assert documents.get("acme", doc_id) is None


def test_listing_pages_through_every_document_newest_first(documents: DocumentStore) -> None:
    sources = [f"file{i}.txt" for i in range(7)]
    for source in sources:
        add(documents, "acme", source)
    add(documents, "globex", "secret.txt")

    pages = [documents.list("acme", limit=3, offset=offset) for offset in (0, 3, 6, 9)]
    assert [len(page) for page in pages] == [3, 3, 1, 0]
    listed = [doc.source for page in pages for doc in page]
    assert listed == list(reversed(sources))
    assert documents.count("acme") == 7
    assert all(doc.tenant_id == "acme" for page in pages for doc in page)


def test_negative_paging_is_refused(documents: DocumentStore) -> None:
    with pytest.raises(ValueError):
        documents.list("acme", limit=-1)
    with pytest.raises(ValueError):
        documents.list("acme", limit=10, offset=-5)


def test_delete_is_tenant_scoped(documents: DocumentStore) -> None:
    doc_id = add(documents, "acme", "contract.pdf")
    assert documents.delete("globex", doc_id) is False
    assert documents.get("acme", doc_id) is not None
    assert documents.delete("acme", doc_id) is True
    assert documents.delete("acme", doc_id) is False
    assert documents.count("acme") == 0


def test_chunk_usage_sums_one_tenant(documents: DocumentStore) -> None:
    assert documents.usage("acme").chunks == 0
    for source, chunks in (("a", 5), ("b", 7)):
        mark_indexed(documents, "acme", add(documents, "acme", source), chunks=chunks)
    mark_indexed(documents, "globex", add(documents, "globex", "c"), chunks=100)
    assert documents.usage("acme").chunks == 12


def test_a_name_created_between_the_look_up_and_the_id_check_is_that_document(
    documents: DocumentStore, sql_database: Database
) -> None:
    # Two uploads of one new name: this one's look-up finds no document, then the other
    # upload commits the name before this one checks whether the name's id is free.
    from app.storage.documents import insert_missing_document

    raced: list[str] = []

    def commit_the_other_upload(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        if raced or "documents.source" not in statement:
            return
        raced.append(document_id("acme", "same.txt"))
        with sql_database.session() as session:
            insert_missing_document(session, "acme", raced[0], "same.txt", 2, sha("v1"), "u1")

    event.listen(sql_database.engine, "after_cursor_execute", commit_the_other_upload)
    try:
        found = documents.identify("acme", "general", "same.txt")
    finally:
        event.remove(sql_database.engine, "after_cursor_execute", commit_the_other_upload)

    # The other upload's document, so this upload is its next version, not a second document
    # under a variant id that the (collection, name) key would refuse.
    assert raced == [found]
    assert [d.document_id for d in documents.named("acme", "same.txt")] == [found]


def test_a_name_is_one_document_per_collection_and_a_moved_one_keeps_its_id(
    documents: DocumentStore, sql_database: Database
) -> None:
    from app.errors import InvalidInput
    from app.services.documents import document_named
    from app.storage.documents import insert_missing_document

    def place(collection: str, source: str) -> str:
        doc_id = documents.identify("acme", collection, source)
        with sql_database.session() as session:
            insert_missing_document(
                session, "acme", doc_id, source, 2, sha("v1"), None, {"collection_id": collection}
            )
        return doc_id

    general = place("general", "handbook.pdf")
    assert general == document_id("acme", "handbook.pdf")  # the id it had before collections
    hr = place("col_hr", "handbook.pdf")
    assert hr not in (general, document_id("acme", "handbook.pdf"))
    assert place("col_hr", "handbook.pdf") == hr  # a re-upload there is the same document
    assert documents.identify("acme", "general", "handbook.pdf") == general
    found = documents.find("acme", "col_hr", "handbook.pdf")
    assert found is not None and found.document_id == hr
    assert documents.find("acme", "col_legal", "handbook.pdf") is None
    assert [d.document_id for d in documents.named("acme", "handbook.pdf")] == sorted(
        [general, hr], key=lambda d: {general: "general", hr: "col_hr"}[d]
    )
    # A document moved out of general keeps its id; the name in general is then a new one.
    with sql_database.session() as session:
        session.execute(
            update(DocumentRow)
            .where(DocumentRow.document_id == general)
            .values(collection_id="col_legal")
        )
    fresh = documents.identify("acme", "general", "handbook.pdf")
    assert fresh not in (general, hr)
    # By name alone: one the caller reads is it; several it reads are a question back; those
    # it may not read are never counted.
    only_hr = document_named(
        documents,
        tenant_id="acme",
        document_id=None,
        source="handbook.pdf",
        readable=lambda d: d == hr,
    )
    assert only_hr is not None and only_hr.document_id == hr
    with pytest.raises(InvalidInput, match="document_id"):
        document_named(
            documents,
            tenant_id="acme",
            document_id=None,
            source="handbook.pdf",
            readable=lambda d: True,
        )
    assert (
        document_named(
            documents,
            tenant_id="acme",
            document_id=None,
            source="handbook.pdf",
            readable=lambda d: False,
        )
        is None
    )
    assert (
        document_named(
            documents,
            tenant_id="acme",
            document_id=general,
            source=None,
            readable=lambda d: d != general,
        )
        is None
    )
