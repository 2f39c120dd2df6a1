"""The migration that keeps what a rewritten question may quote, on a real SQLite file and a
real PostgreSQL database holding rows of the revision before it: a conversation's rewritten
question and its answer record are shown as typed (what the rewrite read is not known), while a
question that was not rewritten, in a conversation or asked with /query, shows as before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from app.services import answer_history
from app.services.conversations import visible_history
from app.storage.answer_records import AnswerRecordStore
from app.storage.conversations import ConversationQuota, ConversationStore
from app.storage.db import Database
from tests.storage.schema_revisions import database_at, migrate_to

pytestmark = pytest.mark.integration

BEFORE = "0016"
T, USER, CONVERSATION = "acme", "usr_1", "c" * 32
NOW = "2026-12-01 10:00:00+00:00"
TYPED = "Who picked it?"
REWRITTEN = "Who picked it, given that The secret code word is PURPLE-ELEPHANT-4417?"
FIRST = "What is the secret code word?"
# (answer id, question asked, question answered, in the conversation at seq)
ASKED = [
    ("a" * 32, FIRST, FIRST, 0),
    ("b" * 32, TYPED, REWRITTEN, 2),
    ("d" * 32, "Where is the vault?", "Where is the vault?", None),  # a /query answer
]


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Database]:
    """An empty database of its own, at the revision before rewrite sources were kept."""
    yield from database_at(BEFORE, request, data_dir)


def _old_rows(database: Database) -> None:
    """A conversation of two turns, the second rewritten, and the records of its answers and of
    a /query answer, as the service wrote them before."""
    with database.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO conversations (conversation_id, tenant_id, user_id, title, "
                "created_at, updated_at) VALUES (:c, :t, :u, 'code', :now, :now)"
            ),
            {"c": CONVERSATION, "t": T, "u": USER, "now": NOW},
        )
        for answer_id, typed, answered, seq in ASKED:
            connection.execute(
                text(
                    "INSERT INTO answer_records (answer_id, tenant_id, user_id, created_at, "
                    "question, cited) VALUES (:a, :t, :u, :now, :q, '[]')"
                ),
                {"a": answer_id, "t": T, "u": USER, "now": NOW, "q": answered},
            )
            if seq is None:
                continue
            for offset, role, content in ((0, "user", typed), (1, "assistant", "An answer.")):
                connection.execute(
                    text(
                        "INSERT INTO conversation_messages (message_id, conversation_id, "
                        "tenant_id, seq, role, content, standalone_question, citations_json, "
                        "size_bytes, created_at) VALUES (:m, :c, :t, :s, :r, :content, :q, "
                        ":cited, 10, :now)"
                    ),
                    {
                        "m": answer_id if role == "assistant" else f"q{answer_id[1:]}",
                        "c": CONVERSATION,
                        "t": T,
                        "s": seq + offset,
                        "r": role,
                        "content": content,
                        "q": answered if role == "user" else None,
                        "cited": "[]" if role == "assistant" else None,
                        "now": NOW,
                    },
                )


def test_rewritten_questions_from_before_show_as_typed(database: Database) -> None:
    _old_rows(database)
    migrate_to(database, "head")

    def reads_everything(_document_id: str) -> bool:
        return True

    records = AnswerRecordStore(database)
    shown = {
        answer_id: answer_history.shown(record, reads_everything).question
        for answer_id in (a for a, *_ in ASKED)
        if (record := records.get(T, answer_id)) is not None
    }
    assert shown == {answer_id: typed for answer_id, typed, _, _ in ASKED}
    store = ConversationStore(database, ConversationQuota(10, 100, 10**6))
    history = store.messages(T, USER, CONVERSATION)
    assert history is not None
    asked = [m.standalone_question for m in visible_history(history, reads_everything)]
    assert asked == [FIRST, None, TYPED, None]
    # Going back drops the columns again and keeps every row.
    migrate_to(database, BEFORE)
    with database.engine.connect() as connection:
        kept = connection.execute(text("SELECT question FROM answer_records ORDER BY answer_id"))
        assert [row.question for row in kept] == [FIRST, REWRITTEN, "Where is the vault?"]
