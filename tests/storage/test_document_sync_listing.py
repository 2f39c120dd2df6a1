"""The documents listing a folder sync reads: by name prefix and sync label, in name order."""

from __future__ import annotations

import pytest

from app.domain import document_id
from app.storage.db import Database
from app.storage.documents import DocumentFilter, DocumentStore

pytestmark = pytest.mark.integration


def test_prefix_and_label_keep_only_their_documents(sql_database: Database) -> None:
    documents = DocumentStore(sql_database)
    for source, label in [
        ("a_b/one.txt", "east"),
        ("axb/two.txt", "east"),  # `_` in the prefix is a character, not a wildcard
        ("a_b/three.txt", "west"),
        ("100%/four.txt", None),
        ("Docs/five.txt", None),
    ]:
        doc_id = document_id("acme", source)
        documents.upsert("acme", doc_id, source, 1, "0" * 64)
        documents.set_sync_root("acme", doc_id, label)
    documents.upsert("globex", document_id("globex", "a_b/x.txt"), "a_b/x.txt", 1, "0" * 64)

    def names(wanted: DocumentFilter, limit: int = 10, offset: int = 0) -> tuple[list[str], int]:
        found = documents.page_matching("acme", wanted, limit, offset)
        return [d.source for d in found.records], found.total

    assert names(DocumentFilter(source_prefix="a_b/")) == (["a_b/one.txt", "a_b/three.txt"], 2)
    assert names(DocumentFilter(source_prefix="100%")) == (["100%/four.txt"], 1)
    # A name is case-sensitive on both databases (SQLite's LIKE is not).
    assert names(DocumentFilter(source_prefix="docs/")) == ([], 0)
    assert names(DocumentFilter(source_prefix="Docs/")) == (["Docs/five.txt"], 1)
    assert names(DocumentFilter(sync_root="east")) == (["a_b/one.txt", "axb/two.txt"], 2)
    assert names(DocumentFilter("a_b/", "west")) == (["a_b/three.txt"], 1)
    assert names(DocumentFilter(sync_root="east"), limit=1, offset=1) == (["axb/two.txt"], 2)
    assert names(DocumentFilter(sync_root="north")) == ([], 0)
