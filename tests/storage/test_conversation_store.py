"""Conversations in the service database (SQLite and PostgreSQL): owner scoping, order, the
turn bound, citations kept per answer, delete."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from app.storage.conversations import ConversationStore, NewTurn
from app.storage.db import Database

pytestmark = pytest.mark.integration


def _turn(n: int, source: str = "a.txt") -> NewTurn:
    citation = {"marker": 1, "document_id": f"doc{n}", "source": source, "page": n}
    return NewTurn(f"question {n}", f"standalone {n}", f"answer {n} [1]", [citation], False)


def test_turns_are_kept_in_order_with_their_own_citations(sql_database: Database) -> None:
    store = ConversationStore(sql_database)
    conversation = store.create("t1", "u1")
    for n in (1, 2):
        assert store.add_turn("t1", "u1", conversation.conversation_id, _turn(n), 10)
    messages = store.messages("t1", "u1", conversation.conversation_id)
    assert messages is not None
    assert [(m.role, m.content) for m in messages] == [
        ("user", "question 1"),
        ("assistant", "answer 1 [1]"),
        ("user", "question 2"),
        ("assistant", "answer 2 [1]"),
    ]
    assert messages[0].standalone_question == "standalone 1"
    assert messages[1].citations is not None and messages[1].citations[0]["document_id"] == "doc1"
    assert messages[3].citations is not None and messages[3].citations[0]["document_id"] == "doc2"
    record = store.get("t1", "u1", conversation.conversation_id)
    assert record is not None and record.title == "question 1" and record.messages == 4


def test_only_the_newest_turns_are_kept(sql_database: Database) -> None:
    store = ConversationStore(sql_database)
    conversation = store.create("t1", "u1")
    for n in range(1, 6):
        store.add_turn("t1", "u1", conversation.conversation_id, _turn(n), 2)
    messages = store.messages("t1", "u1", conversation.conversation_id)
    assert messages is not None
    assert [m.content for m in messages if m.role == "user"] == ["question 4", "question 5"]


def test_another_user_or_tenant_sees_nothing(sql_database: Database) -> None:
    store = ConversationStore(sql_database)
    mine = store.create("t1", "u1").conversation_id
    store.add_turn("t1", "u1", mine, _turn(1), 10)
    for tenant, user in (("t1", "u2"), ("t2", "u1")):
        assert store.get(tenant, user, mine) is None
        assert store.messages(tenant, user, mine) is None
        assert store.add_turn(tenant, user, mine, _turn(2), 10) is None
        assert store.delete(tenant, user, mine) is False
        assert store.list(tenant, user, 10, 0) == ([], 0)
    messages = store.messages("t1", "u1", mine)
    assert messages is not None and len(messages) == 2  # nobody else added or deleted


def test_list_pages_most_recently_used_first_and_delete_removes_messages(
    sql_database: Database,
) -> None:
    store = ConversationStore(sql_database)
    ids = [store.create("t1", "u1").conversation_id for _ in range(3)]
    store.add_turn("t1", "u1", ids[0], _turn(1), 10)  # the oldest becomes the latest used
    first_page, total = store.list("t1", "u1", 2, 0)
    second_page, _ = store.list("t1", "u1", 2, 2)
    assert total == 3
    assert first_page[0].conversation_id == ids[0] and first_page[0].messages == 2
    assert {c.conversation_id for c in first_page + second_page} == set(ids)
    assert store.delete("t1", "u1", ids[0]) is True
    assert store.get("t1", "u1", ids[0]) is None
    assert store.messages("t1", "u1", ids[0]) is None
    assert store.list("t1", "u1", 10, 0)[1] == 2


def test_turns_stored_at_once_all_keep_their_own_place(sql_database: Database) -> None:
    store = ConversationStore(sql_database)
    conversation = store.create("t1", "u1").conversation_id
    with ThreadPoolExecutor(max_workers=6) as pool:
        ids = list(
            pool.map(lambda n: store.add_turn("t1", "u1", conversation, _turn(n), 50), range(12))
        )
    assert all(pair is not None for pair in ids)
    messages = store.messages("t1", "u1", conversation)
    assert messages is not None and len(messages) == 24
    # Each question is directly followed by its own answer.
    for question, answer in zip(messages[::2], messages[1::2], strict=True):
        assert question.content.replace("question", "answer") + " [1]" == answer.content
