"""Feedback on answers: one judgement per person per answer, changed in place when they rate
again; listed and exported for the tenant's admins with the answer's question when the answer
record still holds it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, select

from app.domain import ListedPage
from app.storage.db import DatabaseStore, utc_now
from app.storage.records import listed_page, record_of
from app.storage.tables import AnswerFeedbackRow, AnswerRecordRow

_EXPORT_BATCH = 500


@dataclass(frozen=True)
class FeedbackRecord:
    """A stored judgement, with the question of its answer when the record keeps it."""

    tenant_id: str
    answer_id: str
    user_id: str
    rating: str
    created_at: datetime
    updated_at: datetime
    comment: str | None = None
    helpful_markers: list[int] = field(default_factory=list)
    expected: list[dict[str, Any]] = field(default_factory=list)
    question: str | None = None
    cited: list[dict[str, Any]] = field(default_factory=list)
    # the answer record's, for a rewritten question (see AnswerRecord); never written out
    typed_question: str | None = None
    rewrite_sources: list[str] | None = None

    def public(self) -> dict[str, Any]:
        """The JSON line GET /feedback?format=jsonl exports (a page of the listing is read from
        the record by the API's FeedbackOut, with the same fields)."""
        return {
            "answer_id": self.answer_id,
            "user_id": self.user_id,
            "rating": self.rating,
            "comment": self.comment,
            "helpful_markers": self.helpful_markers,
            "expected": self.expected,
            "question": self.question,
            "cited": self.cited,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


@dataclass(frozen=True)
class NewFeedback:
    """What a person sends about an answer."""

    rating: str
    comment: str | None = None
    helpful_markers: list[int] = field(default_factory=list)
    expected: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class FeedbackFilter:
    """Which feedback an admin lists: by rating, person and time (all optional)."""

    rating: str | None = None
    user_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    with_expected: bool | None = None

    def where(self, tenant_id: str) -> list[ColumnElement[bool]]:
        """The SQL conditions of this filter in the tenant."""
        where = [AnswerFeedbackRow.tenant_id == tenant_id]
        if self.rating is not None:
            where.append(AnswerFeedbackRow.rating == self.rating)
        if self.user_id is not None:
            where.append(AnswerFeedbackRow.user_id == self.user_id)
        if self.since is not None:
            where.append(AnswerFeedbackRow.updated_at >= self.since)
        if self.until is not None:
            where.append(AnswerFeedbackRow.updated_at < self.until)
        if self.with_expected is True:
            where.append(AnswerFeedbackRow.expected != "[]")
        elif self.with_expected is False:
            where.append(AnswerFeedbackRow.expected == "[]")
        return where


def _record(row: AnswerFeedbackRow, answer: AnswerRecordRow | None) -> FeedbackRecord:
    return record_of(
        FeedbackRecord,
        row,
        helpful_markers=json.loads(row.helpful_markers or "[]"),
        expected=json.loads(row.expected or "[]"),
        question=None if answer is None else answer.question,
        cited=[] if answer is None or not answer.cited else json.loads(answer.cited),
        typed_question=None if answer is None else answer.typed_question,
        rewrite_sources=None
        if answer is None or answer.rewrite_sources is None
        else json.loads(answer.rewrite_sources),
    )


def _joined() -> Any:
    return select(AnswerFeedbackRow, AnswerRecordRow).outerjoin(
        AnswerRecordRow,
        (AnswerRecordRow.answer_id == AnswerFeedbackRow.answer_id)
        & (AnswerRecordRow.tenant_id == AnswerFeedbackRow.tenant_id),
    )


class FeedbackStore(DatabaseStore):
    """Writes one person's judgement of an answer and reads the tenant's."""

    def rate(
        self, tenant_id: str, answer_id: str, user_id: str, feedback: NewFeedback
    ) -> tuple[FeedbackRecord, str | None]:
        """Store or change the user's judgement; the stored record and the earlier rating
        (None when this is the first)."""
        now = utc_now()
        values = {
            "rating": feedback.rating,
            "comment": feedback.comment,
            "helpful_markers": json.dumps(feedback.helpful_markers),
            "expected": json.dumps(feedback.expected, ensure_ascii=False),
            "updated_at": now,
        }
        # Two clicks at once from one person must leave one row: the lock orders them.
        with self._db.write_session(f"feedback:{tenant_id}:{answer_id}") as session:
            row = session.scalars(
                select(AnswerFeedbackRow).where(
                    AnswerFeedbackRow.tenant_id == tenant_id,
                    AnswerFeedbackRow.answer_id == answer_id,
                    AnswerFeedbackRow.user_id == user_id,
                )
            ).first()
            previous = None if row is None else row.rating
            if row is None:
                row = AnswerFeedbackRow(
                    tenant_id=tenant_id, answer_id=answer_id, user_id=user_id, created_at=now
                )
                session.add(row)
            for name, value in values.items():
                setattr(row, name, value)
            session.flush()
            answer = session.scalars(
                select(AnswerRecordRow).where(
                    AnswerRecordRow.tenant_id == tenant_id, AnswerRecordRow.answer_id == answer_id
                )
            ).first()
            return _record(row, answer), previous

    def mine(self, tenant_id: str, answer_id: str, user_id: str) -> FeedbackRecord | None:
        """The user's judgement of the answer, if any."""
        query = _joined().where(
            AnswerFeedbackRow.tenant_id == tenant_id,
            AnswerFeedbackRow.answer_id == answer_id,
            AnswerFeedbackRow.user_id == user_id,
        )
        with self._db.session() as session:
            found = session.execute(query).first()
            return None if found is None else _record(*found)

    def page(
        self, tenant_id: str, which: FeedbackFilter, limit: int, offset: int = 0
    ) -> ListedPage[FeedbackRecord]:
        """One page of the tenant's feedback, newest first, and how many match in all."""
        where = which.where(tenant_id)
        query = _joined().order_by(AnswerFeedbackRow.updated_at.desc(), AnswerFeedbackRow.id.desc())
        with self._db.session() as session:
            return listed_page(session, query, where, AnswerFeedbackRow, limit, offset, _record)

    def export(self, tenant_id: str, which: FeedbackFilter) -> Iterator[FeedbackRecord]:
        """Every matching judgement of the tenant, oldest first, read in batches."""
        after = 0
        while True:
            query = (
                _joined()
                .where(*which.where(tenant_id), AnswerFeedbackRow.id > after)
                .order_by(AnswerFeedbackRow.id)
                .limit(_EXPORT_BATCH)
            )
            with self._db.session() as session:
                found = list(session.execute(query))
                rows = [(row.id, _record(row, answer)) for row, answer in found]
            yield from (record for _, record in rows)
            if len(rows) < _EXPORT_BATCH:
                return
            after = rows[-1][0]
