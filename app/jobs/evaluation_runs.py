"""The evaluation runs' own table: what each run measured (progress, per-item results, the
aggregate) and what it ran on (corpus, settings, collections).

A run is executed as an `evaluation_run` job of the job table (app/jobs/store.py), whose id is
the run's: the job table queues, claims fairly, counts it in the tenant's queue quota, and puts
it back after a crash; this table mirrors the run's status for the evaluation API and keeps its
results. A run taken again after an interruption starts over.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import select, update
from sqlalchemy.orm import Session, defer

from app.domain import ListedPage
from app.storage.db import DatabaseStore, affected_rows, utc_now
from app.storage.records import count_rows, listed_page, record_of
from app.storage.tables import EvaluationRunRow, JobRow

RunStatus = Literal["queued", "processing", "done", "failed"]
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

    @property
    def progress(self) -> dict[str, int]:
        """How far the run is: `done` of its `total` items."""
        return {"done": self.progress_done, "total": self.progress_total}


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


def _listed(row: EvaluationRunRow) -> RunRecord:
    """The run as listings show it: without its per-item results."""
    return _record(row, with_results=False)


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


class EvaluationRunStore(DatabaseStore):
    """The durable table of evaluation runs."""

    def create(self, tenant_id: str, new: NewRun, run_id: str | None = None) -> RunRecord:
        """A queued run, on its own (a run to execute is made with its job: `add`)."""
        with self._db.session() as session:
            return self.add(session, tenant_id, new, run_id or secrets.token_hex(16))

    def add(self, session: Session, tenant_id: str, new: NewRun, run_id: str) -> RunRecord:
        """Write a queued run in the caller's transaction (the one creating its job)."""
        now = utc_now()
        row = EvaluationRunRow(
            run_id=run_id,
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
        session.add(row)
        session.flush()
        return _listed(row)

    def count_active(self, tenant_id: str) -> int:
        """The tenant's queued and processing runs."""
        with self._db.session() as session:
            return count_rows(
                session,
                EvaluationRunRow,
                EvaluationRunRow.tenant_id == tenant_id,
                EvaluationRunRow.status.in_(("queued", "processing")),
            )

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
    ) -> ListedPage[RunRecord]:
        """The tenant's runs (of one set when given, only those `visible` keeps), oldest
        first, without per-item results, and how many in all."""
        where = [EvaluationRunRow.tenant_id == tenant_id]
        if set_id is not None:
            where.append(EvaluationRunRow.set_id == set_id)
        query = (
            select(EvaluationRunRow)
            .options(defer(EvaluationRunRow.results))
            .order_by(EvaluationRunRow.created_at, EvaluationRunRow.run_id)
        )
        with self._db.session() as session:
            if visible is not None:  # judged per run: paged after
                runs = map(_listed, session.scalars(query.where(*where)))
                kept = [run for run in runs if visible(run)]
                return ListedPage(kept[offset : offset + limit], len(kept))
            return listed_page(session, query, where, EvaluationRunRow, limit, offset, _listed)

    def started(self, run_id: str) -> None:
        """Its job was claimed: the run starts (over) from its first item."""
        self._set(run_id, status="processing", progress_done=0)

    def queued_again(self, run_id: str) -> None:
        """Its job was put back in the queue (the process running it is stopping)."""
        self._set(run_id, status="queued", progress_done=0)

    def fail_jobless(self) -> int:
        """Fail the runs waiting or running without a job (queued before runs were jobs: no
        worker would ever take them); how many."""
        with self._db.session() as session:
            return affected_rows(
                session,
                update(EvaluationRunRow)
                .where(
                    EvaluationRunRow.status.in_(("queued", "processing")),
                    EvaluationRunRow.run_id.not_in(select(JobRow.job_id)),
                )
                .values(
                    status="failed",
                    error="interrupted by an upgrade of the service; start the run again",
                    updated_at=utc_now(),
                ),
            )

    def _set(self, run_id: str, **values: Any) -> None:
        """Change the run's columns, and when it last changed."""
        with self._db.session() as session:
            session.execute(
                update(EvaluationRunRow)
                .where(EvaluationRunRow.run_id == run_id)
                .values(**values, updated_at=utc_now())
            )

    def progress(self, run_id: str, done: int) -> None:
        """Items finished so far (also the runner's sign of life)."""
        self._set(run_id, progress_done=done)

    def finish(self, run_id: str, summary: dict[str, Any], results: list[dict[str, Any]]) -> None:
        """The run is done: its aggregate and per-item results."""
        self._set(
            run_id,
            status="done",
            progress_done=len(results),
            summary=json.dumps(summary),
            results=json.dumps(results, ensure_ascii=False),
        )

    def fail(self, run_id: str, error: str) -> None:
        """The run failed; why (for the tenant and operators)."""
        self._set(run_id, status="failed", error=error[:MAX_ERROR_CHARS])
