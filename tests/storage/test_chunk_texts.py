"""Chunk texts in the service database, on SQLite and PostgreSQL: tenant-scoped, exact search."""

from __future__ import annotations

import pytest
from chroma_helpers import make_chunks

from app.storage.chunk_texts import ChunkTextStore
from app.storage.db import Database

pytestmark = pytest.mark.integration

TEXTS = [
    "Order part SR-33 for the valve.",
    "Discount: 50% off_peak, C++ runtime, and sr-33 in lower case.",
    "Nothing special here.",
]


@pytest.fixture
def texts(sql_database: Database) -> ChunkTextStore:
    return ChunkTextStore(sql_database)


def test_texts_are_read_back_only_for_their_tenant(texts: ChunkTextStore) -> None:
    acme = make_chunks("acme", "a.txt", TEXTS)
    globex = make_chunks("globex", "a.txt", ["Globex secret plans."])
    texts.put(acme + globex)
    assert texts.get("acme", [c.id for c in acme]) == {c.id: c.text for c in acme}
    assert texts.get("acme", [globex[0].id]) == {}
    assert texts.get("globex", [acme[0].id, globex[0].id]) == {globex[0].id: globex[0].text}


def test_writing_the_same_chunks_again_changes_nothing(texts: ChunkTextStore) -> None:
    chunks = make_chunks("acme", "a.txt", TEXTS)
    texts.put(chunks)
    texts.put(chunks[:2])
    stored = texts.document_chunk_ids("acme", chunks[0].document_id)
    assert sorted(stored) == sorted(c.id for c in chunks)
    assert texts.get("acme", [c.id for c in chunks]) == {c.id: c.text for c in chunks}


def test_many_ids_are_read_in_several_statements(texts: ChunkTextStore) -> None:
    chunks = make_chunks("acme", "big.txt", [f"paragraph {i}" for i in range(1203)])
    texts.put(chunks)
    found = texts.get("acme", [c.id for c in chunks] + ["no-such-id"])
    assert len(found) == 1203 and found[chunks[1202].id] == "paragraph 1202"
    texts.delete("acme", [c.id for c in chunks[:1100]])
    assert len(texts.document_chunk_ids("acme", chunks[0].document_id)) == 103


def test_find_containing_is_exact_case_sensitive_literal_and_tenant_scoped(
    texts: ChunkTextStore,
) -> None:
    acme = make_chunks("acme", "a.txt", TEXTS)
    texts.put(acme + make_chunks("globex", "g.txt", ["Globex stocks SR-33 too."]))
    assert texts.find_containing("acme", "SR-33", 10) == [acme[0].id]
    assert texts.find_containing("acme", "sr-33", 10) == [acme[1].id]
    # `%` and `_` are literal characters, not wildcards.
    assert texts.find_containing("acme", "50% off_peak", 10) == [acme[1].id]
    assert texts.find_containing("acme", "50%off", 10) == []
    assert texts.find_containing("acme", "C++", 10) == [acme[1].id]
    assert len(texts.find_containing("acme", "e", 2)) == 2
    assert texts.find_containing("acme", "", 10) == []
    assert texts.find_containing("nobody", "SR-33", 10) == []


def test_deleting_a_document_or_a_tenant_leaves_the_others(texts: ChunkTextStore) -> None:
    a = make_chunks("acme", "a.txt", TEXTS)
    b = make_chunks("acme", "b.txt", ["Another document."])
    g = make_chunks("globex", "a.txt", TEXTS)
    texts.put(a + b + g)
    texts.delete_document("acme", a[0].document_id)
    assert texts.get("acme", [c.id for c in a + b]) == {b[0].id: b[0].text}
    texts.drop_tenant("acme")
    assert texts.get("acme", [b[0].id]) == {}
    assert len(texts.get("globex", [c.id for c in g])) == 3
