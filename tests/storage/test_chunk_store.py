"""Chunk records and corpus versions in the service database, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest
from chroma_helpers import make_chunks

from app.storage import chunks as chunks_module
from app.storage.chunks import ChunkStore
from app.storage.db import Database

pytestmark = pytest.mark.integration

TEXTS = [
    "Order part SR-33 for the valve.",
    "Discount: 50% off_peak, C++ runtime, and sr-33 in lower case.",
    "اطلب القطعة من المستودع الرئيسي.",
]


@pytest.fixture
def store(sql_database: Database) -> ChunkStore:
    return ChunkStore(sql_database)


def test_records_round_trip_only_for_their_tenant(store: ChunkStore) -> None:
    acme = make_chunks("acme", "manual.pdf", TEXTS, page=4, label="iv")
    acme[2] = replace(acme[2], metadata={"sheet": "Q3", "row": 12})
    globex = make_chunks("globex", "manual.pdf", ["Globex secret plans."])
    store.write_documents("acme", {acme[0].document_id: acme})
    store.write_documents("globex", {globex[0].document_id: globex})
    back = store.get("acme", [acme[2].id, acme[0].id, globex[0].id, "no-such-id"])
    assert back == [acme[2], acme[0]]
    assert back[0].metadata == {"sheet": "Q3", "row": 12} and back[0].page_label == "iv"
    assert store.get("globex", [acme[0].id]) == []
    assert sorted(store.ids("acme")) == sorted(c.id for c in acme)


def test_rewriting_a_document_keeps_what_stays_and_returns_what_left(store: ChunkStore) -> None:
    first = make_chunks("acme", "a.txt", TEXTS)
    doc = first[0].document_id
    assert store.write_documents("acme", {doc: first}) == []
    assert store.write_documents("acme", {doc: first}) == []  # the same file again
    second = make_chunks("acme", "a.txt", [TEXTS[0], "A new paragraph."])
    assert sorted(store.write_documents("acme", {doc: second})) == sorted(c.id for c in first[1:])
    assert sorted(store.ids("acme")) == sorted(c.id for c in second)
    assert store.delete_document("acme", doc) == 2
    assert store.ids("acme") == []


def test_the_version_grows_with_every_change_and_only_then(store: ChunkStore) -> None:
    assert store.version("acme") == 0
    chunks = make_chunks("acme", "a.txt", TEXTS)
    seen = [store.version("acme")]
    store.write_documents("acme", {chunks[0].document_id: chunks})
    seen.append(store.version("acme"))
    assert store.delete_document("acme", "no-such-document") == 0
    assert store.version("acme") == seen[-1]  # nothing changed
    store.delete_document("acme", chunks[0].document_id)
    seen.append(store.version("acme"))
    assert seen == sorted(set(seen)) and store.version("globex") == 0


def test_concurrent_changes_never_share_a_version(store: ChunkStore) -> None:
    """Answers are cached per version: two corpus states must never carry the same one."""
    versions: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def bump() -> None:
        start.wait(timeout=30)
        mine = [store.bump_version("acme") for _ in range(20)]
        with lock:
            versions.extend(mine)

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(versions) == 160 and len(set(versions)) == 160
    assert store.version("acme") == max(versions)


def test_find_containing_is_exact_case_sensitive_literal_and_tenant_scoped(
    store: ChunkStore,
) -> None:
    acme = make_chunks("acme", "a.txt", TEXTS)
    store.write_documents("acme", {acme[0].document_id: acme})
    other = make_chunks("globex", "g.txt", ["Globex stocks SR-33 too."])
    store.write_documents("globex", {other[0].document_id: other})

    def found(needle: str, limit: int = 10) -> list[str]:
        return [c.id for c in store.find_containing("acme", needle, limit)]

    assert found("SR-33") == [acme[0].id]
    assert found("sr-33") == [acme[1].id]
    assert found("50% off_peak") == [acme[1].id]  # `%` and `_` are not wildcards
    assert found("50%off") == []
    assert found("C++") == [acme[1].id]
    assert found("المستودع") == [acme[2].id]
    assert len(found("e", 2)) == 2
    assert found("") == [] and store.find_containing("nobody", "SR-33", 10) == []


def test_large_tenants_are_read_in_pages_and_batches(
    store: ChunkStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chunks_module, "PAGE_SIZE", 7)
    chunks = make_chunks("acme", "big.txt", [f"paragraph {i}" for i in range(1203)])
    store.write_documents("acme", {chunks[0].document_id: chunks})
    listed = [c.id for c in store.iter_tenant("acme")]
    assert listed == sorted(c.id for c in chunks)
    wanted = [c.id for c in reversed(chunks)]
    assert [c.id for c in store.get("acme", wanted)] == wanted
