"""Evaluation runs as durable background jobs: created queued, claimed by one runner at a time,
progress written per item, then done or failed with the per-item results and the aggregate.

A run is claimed with one conditional UPDATE (queued -> processing), so no two runners take it.
A runner refreshes `updated_at` with every item; a processing run whose runner has been silent
for `STALE_AFTER_S` (its process stopped) is queued again and starts over, so a run survives a
restart. Claims take the tenant with the fewest running runs first, then the oldest run.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import func, select, update
from sqlalchemy.orm import defer

from app.storage.db import Database, utc_now
from app.storage.records import record_of
from app.storage.tables import EvaluationRunRow

RunStatus = Literal["queued", "processing", "done", "failed"]
STALE_AFTER_S = 120.0
MAX_ERROR_CHARS = 2000


@dataclass(frozen=True)
class RunRecord:
    """A run as the API shows it (`results` only when asked for)."""

    run_id: str
    tenant_id: str
    set_id: str
    status: str
    answers: bool
    progress_done: int
    progress_total: int
    created_at: datetime
    updated_at: datetime
    corpus_version: int | None = None
    documents: dict[str, dict[str, str]] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    created_by: str | None = None
    # The collections its starter's credential read when it started (None: a run made before
    # runs recorded them).
    collections: tuple[str, ...] | None = None


def _record(row: EvaluationRunRow, with_results: bool) -> RunRecord:
    return record_of(
        RunRecord,
        row,
        collections=None if row.collections is None else tuple(json.loads(row.collections)),
        documents=json.loads(row.documents or "{}"),
        settings=json.loads(row.settings or "{}"),
        summary=json.loads(row.summary or "{}"),
        results=json.loads(row.results or "[]") if with_results else [],
    )


@dataclass(frozen=True)
class NewRun:
    """What a run starts from: its set, whether it answers, and the corpus and settings then."""

    set_id: str
    answers: bool
    total: int
    corpus_version: int
    documents: dict[str, dict[str, str]]
    settings: dict[str, Any]
    created_by: str | None
    collections: tuple[str, ...]


class EvaluationRunStore:
    """The durable table of evaluation runs."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def create(self, tenant_id: str, new: NewRun) -> RunRecord:
        """A queued run."""
        now = utc_now()
        row = EvaluationRunRow(
            run_id=secrets.token_hex(16),
            tenant_id=tenant_id,
            set_id=new.set_id,
            status="queued",
            answers=new.answers,
            progress_done=0,
            progress_total=new.total,
            corpus_version=new.corpus_version,
            documents=json.dumps(new.documents, ensure_ascii=False),
            settings=json.dumps(new.settings, default=str),
            created_by=new.created_by,
            collections=json.dumps(sorted(new.collections)),
            created_at=now,
            updated_at=now,
        )
        with self._db.session() as session:
            session.add(row)
            session.flush()
            return _record(row, with_results=False)

    def count_active(self, tenant_id: str) -> int:
        """The tenant's queued and processing runs."""
        query = select(func.count()).where(
            EvaluationRunRow.tenant_id == tenant_id,
            EvaluationRunRow.status.in_(("queued", "processing")),
        )
        with self._db.session() as session:
            return int(session.scalar(query) or 0)

    def get(self, tenant_id: str, run_id: str, with_results: bool = True) -> RunRecord | None:
        """The tenant's run, or None."""
        query = select(EvaluationRunRow).where(
            EvaluationRunRow.tenant_id == tenant_id, EvaluationRunRow.run_id == run_id
        )
        with self._db.session() as session:
            row = session.scalars(query).first()
            return None if row is None else _record(row, with_results)

    def page(
        self,
        tenant_id: str,
        limit: int,
        offset: int = 0,
        set_id: str | None = None,
        visible: Callable[[RunRecord], bool] | None = None,
    ) -> tuple[list[RunRecord], int]:
        """The tenant's runs (of one set when given, only those `visible` keeps), oldest
        first, without per-item results, and how many in all."""
        where = [EvaluationRunRow.tenant_id == tenant_id]
        if set_id is not None:
            where.append(EvaluationRunRow.set_id == set_id)
        query = (
            select(EvaluationRunRow)
            .options(defer(EvaluationRunRow.results))
            .where(*where)
            .order_by(EvaluationRunRow.created_at, EvaluationRunRow.run_id)
        )
        with self._db.session() as session:
            if visible is not None:  # judged per run: paged after
                kept = [
                    run
                    for run in (_record(row, False) for row in session.scalars(query))
                    if visible(run)
                ]
                return kept[offset : offset + limit], len(kept)
            rows = [
                _record(row, with_results=False)
                for row in session.scalars(query.limit(limit).offset(offset))
            ]
            total = session.scalar(select(func.count()).select_from(EvaluationRunRow).where(*where))
            return rows, int(total or 0)

    def claim_next(self, now: datetime | None = None) -> RunRecord | None:
        """Take the next run to execute (a stale processing one is queued again first)."""
        now = now or utc_now()
        stale = now - timedelta(seconds=STALE_AFTER_S)
        with self._db.session() as session:
            session.execute(
                update(EvaluationRunRow)
                .where(EvaluationRunRow.status == "processing", EvaluationRunRow.updated_at < stale)
                .values(status="queued", progress_done=0, updated_at=now)
            )
        with self._db.session() as session:
            running = dict(
                session.execute(
                    select(EvaluationRunRow.tenant_id, func.count())
                    .where(EvaluationRunRow.status == "processing")
                    .group_by(EvaluationRunRow.tenant_id)
                ).all()
            )
            queued = session.execute(
                select(EvaluationRunRow.run_id, EvaluationRunRow.tenant_id)
                .where(EvaluationRunRow.status == "queued")
                .order_by(EvaluationRunRow.created_at, EvaluationRunRow.run_id)
            ).all()
        for run_id, _tenant in sorted(queued, key=lambda r: running.get(r[1], 0)):
            with self._db.session() as session:
                claimed = session.execute(
                    update(EvaluationRunRow)
                    .where(EvaluationRunRow.run_id == run_id, EvaluationRunRow.status == "queued")
                    .values(status="processing", progress_done=0, updated_at=utc_now())
                )
                if claimed.rowcount:  # type: ignore[attr-defined]
                    row = session.get(EvaluationRunRow, run_id)
                    assert row is not None
                    return _record(row, with_results=False)
        return None

    def requeue(self, run_id: str) -> None:
        """Put a processing run back in the queue (its runner is stopping)."""
        with self._db.session() as session:
            session.execute(
                update(EvaluationRunRow)
                .where(EvaluationRunRow.run_id == run_id, EvaluationRunRow.status == "processing")
                .values(status="queued", progress_done=0, updated_at=utc_now())
            )

    def progress(self, run_id: str, done: int) -> None:
        """Items finished so far (also the runner's sign of life)."""
        with self._db.session() as session:
            session.execute(
                update(EvaluationRunRow)
                .where(EvaluationRunRow.run_id == run_id)
                .values(progress_done=done, updated_at=utc_now())
            )

    def finish(self, run_id: str, summary: dict[str, Any], results: list[dict[str, Any]]) -> None:
        """The run is done: its aggregate and per-item results."""
        with self._db.session() as session:
            session.execute(
                update(EvaluationRunRow)
                .where(EvaluationRunRow.run_id == run_id)
                .values(
                    status="done",
                    progress_done=len(results),
                    summary=json.dumps(summary),
                    results=json.dumps(results, ensure_ascii=False),
                    updated_at=utc_now(),
                )
            )

    def fail(self, run_id: str, error: str) -> None:
        """The run failed; why (for the tenant and operators)."""
        with self._db.session() as session:
            session.execute(
                update(EvaluationRunRow)
                .where(EvaluationRunRow.run_id == run_id)
                .values(status="failed", error=error[:MAX_ERROR_CHARS], updated_at=utc_now())
            )
