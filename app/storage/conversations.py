"""Conversations and their messages in the service database, scoped by tenant and user.

Every method takes the tenant and the user: a conversation of someone else behaves exactly like
a missing one. A conversation keeps its latest `max_turns` turns (a turn is a question and its
answer); storing a new turn past the bound deletes the oldest ones.

The store enforces its `ConversationQuota` (conversations per user, messages a conversation takes
over its life, stored bytes per tenant): a create or a turn over one raises QuotaExceeded and
writes nothing.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.domain import ListedPage
from app.errors import QuotaExceeded
from app.storage.db import Database, utc_now
from app.storage.records import count_rows, listed_page, record_of
from app.storage.tables import CONVERSATION_TITLE_CHARS, ConversationMessageRow, ConversationRow

if TYPE_CHECKING:
    from app.config import Settings

Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class ConversationRecord:
    """A conversation as the API shows it (detached from any session)."""

    conversation_id: str
    tenant_id: str
    user_id: str
    title: str
    created_at: datetime
    updated_at: datetime
    messages: int = 0


@dataclass(frozen=True)
class MessageRecord:
    """One stored message; `citations` only on answers. A question's `rewrite_sources` are
    the documents its standalone question may quote (None: not known)."""

    message_id: str
    role: Role
    content: str
    standalone_question: str | None
    citations: list[dict[str, Any]] | None
    refused: bool | None
    created_at: datetime
    rewrite_sources: list[str] | None = None


@dataclass(frozen=True)
class NewTurn:
    """A question and its answer, stored together once the answer is complete."""

    question: str
    standalone_question: str
    answer: str
    citations: list[dict[str, Any]]
    refused: bool
    answer_id: str | None = None  # the answer's id becomes its message id (one id to rate)
    rewrite_sources: list[str] | None = None  # the documents the standalone question may quote


@dataclass(frozen=True)
class StoredTurn:
    """Where a turn was stored: its conversation and the ids of its two messages."""

    conversation_id: str
    question_message_id: str
    answer_message_id: str


@dataclass(frozen=True)
class ConversationQuota:
    """Bounds on what conversations may store (RAG_QUOTA_CONVERSATION*)."""

    conversations_per_user: int
    messages_per_conversation: int  # over the conversation's life: dropped turns still count
    stored_bytes_per_tenant: int  # UTF-8 bytes of every message's text, question and citations

    @classmethod
    def from_settings(cls, settings: Settings) -> ConversationQuota:
        """RAG_QUOTA_CONVERSATIONS_PER_USER, _CONVERSATION_MESSAGES and _CONVERSATION_BYTES."""
        return cls(
            conversations_per_user=settings.quota_conversations_per_user,
            messages_per_conversation=settings.quota_conversation_messages,
            stored_bytes_per_tenant=settings.quota_conversation_bytes,
        )


@dataclass(frozen=True)
class ConversationUsage:
    """How much of each conversation quota a user (and their tenant) uses."""

    conversations: int  # the user's conversations
    fullest_conversation_messages: int  # messages taken by the user's fullest conversation
    stored_bytes: int  # the tenant's stored conversation bytes


def _utf8_size(*texts: str | None) -> int:
    return sum(len(text.encode("utf-8")) for text in texts if text is not None)


def _conversation(row: ConversationRow, messages: int = 0) -> ConversationRecord:
    return record_of(ConversationRecord, row, messages=messages)


def _message(row: ConversationMessageRow) -> MessageRecord:
    citations = json.loads(row.citations_json) if row.citations_json is not None else None
    sources = json.loads(row.rewrite_sources) if row.rewrite_sources is not None else None
    return record_of(MessageRecord, row, citations=citations, rewrite_sources=sources)


def _new_id() -> str:
    return secrets.token_hex(16)


def one_line_title(text: str) -> str:
    """A conversation's title from a text (a title asked for, or the first question): its
    white space folded to single spaces, cut to CONVERSATION_TITLE_CHARS."""
    return " ".join(text.split())[:CONVERSATION_TITLE_CHARS]


class ConversationStore:
    """Tenant- and user-scoped conversations in the service database."""

    def __init__(self, database: Database, quota: ConversationQuota) -> None:
        self._db = database
        self.quota = quota

    def create(self, tenant_id: str, user_id: str, title: str = "") -> ConversationRecord:
        """A new, empty conversation of this user (QuotaExceeded when they have their quota);
        without a title, its first question gives it one."""
        # Two creates at once would both count below the quota; the lock orders them.
        with self._db.named_lock(f"conversations-of:{tenant_id}:{user_id}"):
            return self._create(tenant_id, user_id, title)

    def _create(self, tenant_id: str, user_id: str, title: str) -> ConversationRecord:
        limit = self.quota.conversations_per_user
        now = utc_now()
        row = ConversationRow(
            conversation_id=_new_id(),
            tenant_id=tenant_id,
            user_id=user_id,
            title=title,
            created_at=now,
            updated_at=now,
        )
        with self._db.session() as session:
            if self._conversations_of(session, tenant_id, user_id) >= limit:
                raise QuotaExceeded(
                    "conversations",
                    f"quota exceeded: conversations (limit {limit} per user); delete "
                    "conversations before starting new ones",
                )
            session.add(row)
        return _conversation(row)

    def _conversations_of(self, session: Session, tenant_id: str, user_id: str) -> int:
        return count_rows(
            session,
            ConversationRow,
            ConversationRow.tenant_id == tenant_id,
            ConversationRow.user_id == user_id,
        )

    def _owned(
        self, session: Session, tenant_id: str, user_id: str, conversation_id: str
    ) -> ConversationRow | None:
        return session.scalars(
            select(ConversationRow).where(
                ConversationRow.conversation_id == conversation_id,
                ConversationRow.tenant_id == tenant_id,
                ConversationRow.user_id == user_id,
            )
        ).first()

    def get(self, tenant_id: str, user_id: str, conversation_id: str) -> ConversationRecord | None:
        """The conversation, or None when missing or someone else's."""
        with self._db.session() as session:
            row = self._owned(session, tenant_id, user_id, conversation_id)
            if row is None:
                return None
            return _conversation(row, self._count(session, conversation_id))

    def messages(
        self, tenant_id: str, user_id: str, conversation_id: str
    ) -> list[MessageRecord] | None:
        """The kept messages in order, or None when the conversation is missing or not theirs."""
        with self._db.session() as session:
            if self._owned(session, tenant_id, user_id, conversation_id) is None:
                return None
            rows = session.scalars(
                select(ConversationMessageRow)
                .where(ConversationMessageRow.conversation_id == conversation_id)
                .order_by(ConversationMessageRow.seq)
            ).all()
            return [_message(row) for row in rows]

    def list(
        self, tenant_id: str, user_id: str, limit: int, offset: int
    ) -> ListedPage[ConversationRecord]:
        """One page of the user's conversations, most recently used first, and their total."""
        owner = (ConversationRow.tenant_id == tenant_id, ConversationRow.user_id == user_id)
        counts = (
            select(
                ConversationMessageRow.conversation_id,
                func.count().label("messages"),
            )
            .group_by(ConversationMessageRow.conversation_id)
            .subquery()
        )
        query = (
            select(ConversationRow, func.coalesce(counts.c.messages, 0))
            .outerjoin(counts, counts.c.conversation_id == ConversationRow.conversation_id)
            .order_by(ConversationRow.updated_at.desc(), ConversationRow.conversation_id)
        )
        with self._db.session() as session:
            return listed_page(
                session,
                query,
                owner,
                ConversationRow,
                limit,
                offset,
                lambda row, messages: _conversation(row, int(messages)),
            )

    def delete(self, tenant_id: str, user_id: str, conversation_id: str) -> bool:
        """Delete the conversation and its messages; False when missing or not theirs."""
        with self._db.session() as session:
            row = self._owned(session, tenant_id, user_id, conversation_id)
            if row is None:
                return False
            session.execute(
                delete(ConversationMessageRow).where(
                    ConversationMessageRow.conversation_id == conversation_id
                )
            )
            session.delete(row)
            return True

    def add_turn(
        self, tenant_id: str, user_id: str, conversation_id: str, turn: NewTurn, max_turns: int
    ) -> StoredTurn | None:
        """Store a question and its answer, dropping turns beyond the newest `max_turns`.

        Returns where they were stored, or None when the conversation is gone.
        QuotaExceeded, storing nothing, when the turn would pass the conversation's messages or
        the tenant's stored bytes.
        """
        # Two answers finishing at once in one conversation (two tabs, cache hits) would read the
        # same last position, and two in one tenant the same stored bytes; the lock orders them,
        # across processes on PostgreSQL too.
        with self._db.named_lock(f"conversation-turns:{tenant_id}"):
            return self._add_turn(tenant_id, user_id, conversation_id, turn, max_turns)

    def _add_turn(
        self, tenant_id: str, user_id: str, conversation_id: str, turn: NewTurn, max_turns: int
    ) -> StoredTurn | None:
        now = utc_now()
        with self._db.session() as session:
            row = self._owned(session, tenant_id, user_id, conversation_id)
            if row is None:
                return None
            seq = self._messages_taken(session, conversation_id)
            self._check_messages(seq)
            question = ConversationMessageRow(
                message_id=_new_id(),
                conversation_id=conversation_id,
                tenant_id=tenant_id,
                seq=seq,
                role="user",
                content=turn.question,
                standalone_question=turn.standalone_question,
                rewrite_sources=None
                if turn.rewrite_sources is None
                else json.dumps(turn.rewrite_sources),
                size_bytes=_utf8_size(turn.question, turn.standalone_question),
                created_at=now,
            )
            citations_json = json.dumps(turn.citations, ensure_ascii=False)
            answer = ConversationMessageRow(
                message_id=turn.answer_id or _new_id(),
                conversation_id=conversation_id,
                tenant_id=tenant_id,
                seq=seq + 1,
                role="assistant",
                content=turn.answer,
                citations_json=citations_json,
                refused=turn.refused,
                size_bytes=_utf8_size(turn.answer, citations_json),
                created_at=now,
            )
            session.add_all([question, answer])
            if not row.title:
                row.title = one_line_title(turn.question)
            row.updated_at = now
            session.flush()
            self._drop_oldest(session, conversation_id, keep_messages=2 * max_turns)
            # Measured with the turn in and the dropped turns out; over it, the session's
            # rollback undoes both.
            self._check_stored_bytes(self._stored_bytes(session, tenant_id), 0)
            return StoredTurn(conversation_id, question.message_id, answer.message_id)

    def check_room(self, tenant_id: str, user_id: str, conversation_id: str, question: str) -> bool:
        """Before answering: QuotaExceeded when a turn with this question cannot be stored
        (the conversation is full, or the tenant's bytes leave no room for the question);
        False when the conversation is missing or not theirs."""
        with self._db.session() as session:
            if self._owned(session, tenant_id, user_id, conversation_id) is None:
                return False
            self._check_messages(self._messages_taken(session, conversation_id))
            self._check_stored_bytes(self._stored_bytes(session, tenant_id), _utf8_size(question))
            return True

    def usage(self, tenant_id: str, user_id: str) -> ConversationUsage:
        """The user's conversations and fullest conversation, and the tenant's stored bytes."""
        with self._db.session() as session:
            last = session.scalar(
                select(func.max(ConversationMessageRow.seq))
                .join(
                    ConversationRow,
                    ConversationRow.conversation_id == ConversationMessageRow.conversation_id,
                )
                .where(ConversationRow.tenant_id == tenant_id, ConversationRow.user_id == user_id)
            )
            return ConversationUsage(
                conversations=self._conversations_of(session, tenant_id, user_id),
                fullest_conversation_messages=0 if last is None else last + 1,
                stored_bytes=self._stored_bytes(session, tenant_id),
            )

    def _messages_taken(self, session: Session, conversation_id: str) -> int:
        # Positions are never reused, so the next one is the number of messages ever stored.
        last = session.scalar(
            select(func.max(ConversationMessageRow.seq)).where(
                ConversationMessageRow.conversation_id == conversation_id
            )
        )
        return 0 if last is None else last + 1

    def _stored_bytes(self, session: Session, tenant_id: str) -> int:
        total = session.scalar(
            select(func.coalesce(func.sum(ConversationMessageRow.size_bytes), 0)).where(
                ConversationMessageRow.tenant_id == tenant_id
            )
        )
        return int(total or 0)

    def _check_messages(self, taken: int) -> None:
        limit = self.quota.messages_per_conversation
        if taken + 2 > limit:
            raise QuotaExceeded(
                "conversation_messages",
                f"quota exceeded: conversation_messages (limit {limit} messages, two per turn, "
                f"{taken} taken); start a new conversation",
            )

    def _check_stored_bytes(self, used: int, adding: int) -> None:
        limit = self.quota.stored_bytes_per_tenant
        if used + adding > limit:
            raise QuotaExceeded(
                "conversation_bytes",
                f"tenant quota exceeded: conversation_bytes (limit {limit} bytes); delete "
                "conversations to make room",
            )

    def _count(self, session: Session, conversation_id: str) -> int:
        return count_rows(
            session,
            ConversationMessageRow,
            ConversationMessageRow.conversation_id == conversation_id,
        )

    def _drop_oldest(self, session: Session, conversation_id: str, keep_messages: int) -> None:
        kept = (
            select(ConversationMessageRow.seq)
            .where(ConversationMessageRow.conversation_id == conversation_id)
            .order_by(ConversationMessageRow.seq.desc())
            .limit(keep_messages)
        )
        oldest_kept = session.scalar(select(func.min(kept.subquery().c.seq)))
        if oldest_kept is None:
            return
        session.execute(
            delete(ConversationMessageRow).where(
                ConversationMessageRow.conversation_id == conversation_id,
                ConversationMessageRow.seq < oldest_kept,
            )
        )
