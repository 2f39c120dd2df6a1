"""Conversations in the service database (SQLite and PostgreSQL): owner scoping, order, the
turn bound, citations kept per answer, delete, and the quotas (nothing written over one, even
when many turns or creates race for the last room)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from app.domain import ListedPage
from app.errors import QuotaExceeded
from app.storage.conversations import ConversationQuota, ConversationStore, NewTurn
from app.storage.db import Database
from app.storage.tables import ConversationMessageRow, ConversationRow

ROOMY = ConversationQuota(
    conversations_per_user=100, messages_per_conversation=1000, stored_bytes_per_tenant=10**9
)

pytestmark = pytest.mark.integration


def _turn(n: int, source: str = "a.txt") -> NewTurn:
    citation = {"marker": 1, "document_id": f"doc{n}", "source": source, "page": n}
    return NewTurn(f"question {n}", f"standalone {n}", f"answer {n} [1]", [citation], False)


def test_turns_are_kept_in_order_with_their_own_citations(sql_database: Database) -> None:
    store = ConversationStore(sql_database, ROOMY)
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
    store = ConversationStore(sql_database, ROOMY)
    conversation = store.create("t1", "u1")
    for n in range(1, 6):
        store.add_turn("t1", "u1", conversation.conversation_id, _turn(n), 2)
    messages = store.messages("t1", "u1", conversation.conversation_id)
    assert messages is not None
    assert [m.content for m in messages if m.role == "user"] == ["question 4", "question 5"]


def test_another_user_or_tenant_sees_nothing(sql_database: Database) -> None:
    store = ConversationStore(sql_database, ROOMY)
    mine = store.create("t1", "u1").conversation_id
    store.add_turn("t1", "u1", mine, _turn(1), 10)
    for tenant, user in (("t1", "u2"), ("t2", "u1")):
        assert store.get(tenant, user, mine) is None
        assert store.messages(tenant, user, mine) is None
        assert store.add_turn(tenant, user, mine, _turn(2), 10) is None
        assert store.delete(tenant, user, mine) is False
        assert store.list(tenant, user, 10, 0) == ListedPage([], 0)
    messages = store.messages("t1", "u1", mine)
    assert messages is not None and len(messages) == 2  # nobody else added or deleted


def test_list_pages_most_recently_used_first_and_delete_removes_messages(
    sql_database: Database,
) -> None:
    store = ConversationStore(sql_database, ROOMY)
    ids = [store.create("t1", "u1").conversation_id for _ in range(3)]
    store.add_turn("t1", "u1", ids[0], _turn(1), 10)  # the oldest becomes the latest used
    first = store.list("t1", "u1", 2, 0)
    first_page, second_page = first.records, store.list("t1", "u1", 2, 2).records
    assert first.total == 3
    assert first_page[0].conversation_id == ids[0] and first_page[0].messages == 2
    assert {c.conversation_id for c in first_page + second_page} == set(ids)
    assert store.delete("t1", "u1", ids[0]) is True
    assert store.get("t1", "u1", ids[0]) is None
    assert store.messages("t1", "u1", ids[0]) is None
    assert store.list("t1", "u1", 10, 0).total == 2


def test_turns_stored_at_once_all_keep_their_own_place(sql_database: Database) -> None:
    store = ConversationStore(sql_database, ROOMY)
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


def _rows(database: Database) -> tuple[int, int]:
    """How many conversation and message rows the database holds, every tenant included."""
    with database.session() as session:
        conversations = session.query(ConversationRow).count()
        messages = session.query(ConversationMessageRow).count()
    return conversations, messages


def _turn_bytes(n: int) -> int:
    """The bytes `_turn(n)` is measured at (question, standalone, answer, citations JSON)."""
    turn = _turn(n)
    citations = json.dumps(turn.citations, ensure_ascii=False)
    texts = (turn.question, turn.standalone_question, turn.answer, citations)
    return sum(len(text.encode()) for text in texts)


def test_a_user_at_the_conversation_quota_cannot_start_another(sql_database: Database) -> None:
    store = ConversationStore(sql_database, replace(ROOMY, conversations_per_user=2))
    first, _ = (store.create("t1", "u1") for _ in range(2))
    with pytest.raises(QuotaExceeded) as refused:
        store.create("t1", "u1")
    assert refused.value.quota == "conversations" and "limit 2" in refused.value.message
    assert _rows(sql_database) == (2, 0)
    assert store.usage("t1", "u1").conversations == 2
    # Another user, of this tenant or another, has a quota of their own.
    store.create("t1", "u2")
    store.create("t2", "u1")
    # Deleting one makes room again.
    assert store.delete("t1", "u1", first.conversation_id)
    store.create("t1", "u1")


def test_creates_racing_for_the_last_room_make_exactly_the_quota(sql_database: Database) -> None:
    store = ConversationStore(sql_database, replace(ROOMY, conversations_per_user=3))

    def create(_: int) -> bool:
        try:
            store.create("t1", "u1")
        except QuotaExceeded:
            return False
        return True

    with ThreadPoolExecutor(max_workers=6) as pool:
        made = list(pool.map(create, range(12)))
    assert made.count(True) == 3
    assert store.list("t1", "u1", 50, 0).total == 3


def test_a_conversation_takes_its_message_quota_over_its_life(sql_database: Database) -> None:
    # Only the newest turn is kept, but every stored turn counts towards the quota.
    store = ConversationStore(sql_database, replace(ROOMY, messages_per_conversation=6))
    conversation = store.create("t1", "u1").conversation_id
    for n in range(3):
        assert store.add_turn("t1", "u1", conversation, _turn(n), 1) is not None
    assert store.check_room("t1", "u1", "missing", "q") is False
    with pytest.raises(QuotaExceeded) as before:
        store.check_room("t1", "u1", conversation, "question 3")
    with pytest.raises(QuotaExceeded) as refused:
        store.add_turn("t1", "u1", conversation, _turn(3), 1)
    for error in (before.value, refused.value):
        assert error.quota == "conversation_messages" and "new conversation" in error.message
    kept = store.messages("t1", "u1", conversation)
    assert kept is not None and [m.content for m in kept] == ["question 2", "answer 2 [1]"]
    assert store.usage("t1", "u1").fullest_conversation_messages == 6
    # A new conversation of the same user starts from zero.
    fresh = store.create("t1", "u1").conversation_id
    assert store.check_room("t1", "u1", fresh, "question 4") is True
    assert store.add_turn("t1", "u1", fresh, _turn(4), 1) is not None


def test_stored_bytes_are_counted_per_tenant_and_a_turn_past_them_stores_nothing(
    sql_database: Database,
) -> None:
    limit = 2 * _turn_bytes(1) + _turn_bytes(1) // 2  # room for two and a half turns
    store = ConversationStore(sql_database, replace(ROOMY, stored_bytes_per_tenant=limit))
    mine = store.create("t1", "u1").conversation_id
    colleague = store.create("t1", "u2").conversation_id
    store.add_turn("t1", "u1", mine, _turn(1), 10)
    store.add_turn("t1", "u2", colleague, _turn(2), 10)
    assert store.usage("t1", "u1").stored_bytes == _turn_bytes(1) + _turn_bytes(2)
    before = _rows(sql_database)
    with pytest.raises(QuotaExceeded) as refused:
        store.add_turn("t1", "u1", mine, _turn(3), 10)
    assert refused.value.quota == "conversation_bytes"
    assert _rows(sql_database) == before  # neither the question nor the answer was kept
    record = store.get("t1", "u1", mine)
    assert record is not None and record.messages == 2
    # Another tenant's bytes are its own.
    theirs = store.create("t2", "u1").conversation_id
    assert store.add_turn("t2", "u1", theirs, _turn(3), 10) is not None
    assert store.usage("t2", "u1").stored_bytes == _turn_bytes(3)
    # A question that alone does not fit is refused before it is answered.
    with pytest.raises(QuotaExceeded):
        store.check_room("t1", "u1", mine, "x" * limit)
    # Deleting a conversation frees its bytes.
    assert store.delete("t1", "u2", colleague)
    assert store.add_turn("t1", "u1", mine, _turn(3), 10) is not None


def test_stored_bytes_count_utf8_bytes_not_characters(sql_database: Database) -> None:
    store = ConversationStore(sql_database, ROOMY)
    conversation = store.create("t1", "u1").conversation_id
    arabic = NewTurn("ما هو؟", "ما هو؟", "جواب", [], False)
    store.add_turn("t1", "u1", conversation, arabic, 10)
    expected = sum(len(t.encode()) for t in ("ما هو؟", "ما هو؟", "جواب", "[]"))
    assert store.usage("t1", "u1").stored_bytes == expected


def test_turns_racing_for_the_last_bytes_never_pass_the_tenant_quota(
    sql_database: Database,
) -> None:
    limit = 3 * _turn_bytes(1)
    store = ConversationStore(sql_database, replace(ROOMY, stored_bytes_per_tenant=limit))
    conversations = [store.create("t1", f"u{i}").conversation_id for i in range(6)]

    def add(i: int) -> bool:
        try:
            return store.add_turn("t1", f"u{i}", conversations[i], _turn(1), 10) is not None
        except QuotaExceeded:
            return False

    with ThreadPoolExecutor(max_workers=6) as pool:
        stored = list(pool.map(add, range(6)))
    assert stored.count(True) == 3
    assert store.usage("t1", "u0").stored_bytes == limit
