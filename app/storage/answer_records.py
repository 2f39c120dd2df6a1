"""The answer record: per tenant, a short account of each answer (question, cited and
retrieved documents, timings, model), kept RAG_ANSWER_LOG_DAYS.

Every read takes the tenant, and the reads for non-admins also take the user: a record is never
readable across tenants, and a reader sees only their own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select

from app.domain import ListedPage
from app.storage.db import DatabaseStore, affected_rows, utc_now
from app.storage.records import columns_of, listed_page, record_of
from app.storage.tables import AnswerRecordRow

_EXPORT_BATCH = 500


@dataclass(frozen=True)
class AnswerRecord:
    """One answer as the record keeps it; `question` is None when the record is off.

    A question rewritten from earlier turns of a conversation keeps how it was typed and the
    documents the rewrite may quote (`rewrite_sources`; None when not known), so that a reader
    who does not read all of them is shown it as typed. Neither is written out as such.
    """

    answer_id: str
    tenant_id: str
    user_id: str
    created_at: datetime
    question: str | None = None
    refused: bool | None = None
    cache: str | None = None
    model: str | None = None
    corpus_version: int | None = None
    cited: list[dict[str, Any]] = field(default_factory=list)
    retrieved: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    total_ms: float | None = None
    typed_question: str | None = None
    rewrite_sources: list[str] | None = None

    def public(self) -> dict[str, Any]:
        """The JSON line GET /answers/export writes (the API's AnswerRecordOut reads the record
        itself, with the same fields)."""
        return {
            "answer_id": self.answer_id,
            "user_id": self.user_id,
            "created_at": self.created_at.isoformat(),
            "question": self.question,
            "refused": self.refused,
            "cache": self.cache,
            "model": self.model,
            "cited": self.cited,
            "retrieved": self.retrieved,
            "timings": self.timings,
            "total_ms": self.total_ms,
        }


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _record(row: AnswerRecordRow) -> AnswerRecord:
    return record_of(
        AnswerRecord,
        row,
        cited=json.loads(row.cited or "[]"),
        retrieved=json.loads(row.retrieved or "[]"),
        timings=json.loads(row.timings or "{}"),
        rewrite_sources=None if row.rewrite_sources is None else json.loads(row.rewrite_sources),
    )


class AnswerRecordStore(DatabaseStore):
    """Writes, reads, exports and deletes answer records."""

    def add(self, record: AnswerRecord) -> None:
        """Store one answer's record."""
        with self._db.session() as session:
            session.add(
                AnswerRecordRow(
                    **columns_of(
                        record,
                        cited=_json(record.cited if record.question is not None else None),
                        retrieved=_json(record.retrieved if record.question is not None else None),
                        timings=_json(record.timings if record.question is not None else None),
                        rewrite_sources=_json(record.rewrite_sources),
                    )
                )
            )

    def get(
        self, tenant_id: str, answer_id: str, user_id: str | None = None
    ) -> AnswerRecord | None:
        """The tenant's record of this answer (only the user's own when `user_id` is given)."""
        where = [AnswerRecordRow.tenant_id == tenant_id, AnswerRecordRow.answer_id == answer_id]
        if user_id is not None:
            where.append(AnswerRecordRow.user_id == user_id)
        with self._db.session() as session:
            row = session.scalars(select(AnswerRecordRow).where(*where)).first()
            return None if row is None else _record(row)

    def page(
        self, tenant_id: str, limit: int, offset: int = 0, user_id: str | None = None
    ) -> ListedPage[AnswerRecord]:
        """One page of the tenant's records (one user's when given), newest first, and the
        count of all."""
        where = [AnswerRecordRow.tenant_id == tenant_id]
        if user_id is not None:
            where.append(AnswerRecordRow.user_id == user_id)
        query = select(AnswerRecordRow).order_by(
            AnswerRecordRow.created_at.desc(), AnswerRecordRow.answer_id
        )
        with self._db.session() as session:
            return listed_page(session, query, where, AnswerRecordRow, limit, offset, _record)

    def export(self, tenant_id: str) -> Iterator[AnswerRecord]:
        """Every record of the tenant, oldest first, read in batches."""
        after: tuple[datetime, str] | None = None
        while True:
            query = select(AnswerRecordRow).where(AnswerRecordRow.tenant_id == tenant_id)
            if after is not None:
                at, answer_id = after
                query = query.where(
                    (AnswerRecordRow.created_at > at)
                    | ((AnswerRecordRow.created_at == at) & (AnswerRecordRow.answer_id > answer_id))
                )
            query = query.order_by(AnswerRecordRow.created_at, AnswerRecordRow.answer_id)
            with self._db.session() as session:
                rows = [_record(row) for row in session.scalars(query.limit(_EXPORT_BATCH))]
            yield from rows
            if len(rows) < _EXPORT_BATCH:
                return
            after = (rows[-1].created_at, rows[-1].answer_id)

    def delete(self, tenant_id: str, before: datetime | None = None) -> int:
        """Delete the tenant's records (those older than `before` when given); how many went."""
        where = [AnswerRecordRow.tenant_id == tenant_id]
        if before is not None:
            where.append(AnswerRecordRow.created_at < before)
        with self._db.session() as session:
            return affected_rows(session, delete(AnswerRecordRow).where(*where))

    def prune(self, keep_days: float, now: datetime | None = None) -> int:
        """Delete every tenant's records older than `keep_days`; how many went."""
        cutoff = (now or utc_now()) - timedelta(days=keep_days)
        with self._db.session() as session:
            return affected_rows(
                session, delete(AnswerRecordRow).where(AnswerRecordRow.created_at < cutoff)
            )
