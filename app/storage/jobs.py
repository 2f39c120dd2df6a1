"""The durable ingestion job table: the API creates and polls, workers claim and report.

A job moves queued -> processing -> done | failed. `claim_next` hands each queued job to exactly
one worker, across threads and processes: PostgreSQL locks the row with `FOR UPDATE SKIP LOCKED`;
SQLite serialises writers, so a single conditional UPDATE cannot hand the same job out twice.

`create` with an `active_limit` never lets a tenant exceed it, however many uploads race: the job
is inserted by one conditional INSERT ... SELECT that counts the tenant's active jobs. SQLite
evaluates it under the write lock; PostgreSQL first takes a per-tenant advisory lock for the
transaction, so the count of the next creator already sees this one's job.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import Integer, String, Text, func, insert, literal, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column
from sqlalchemy.sql.dml import ReturningInsert

from app.storage.db import Base, Database, UTCDateTime, advisory_key, utc_now
from app.storage.documents import insert_missing_document

JobStatus = Literal["queued", "processing", "done", "failed"]
ACTIVE_STATUSES: tuple[JobStatus, ...] = ("queued", "processing")
MAX_ERROR_CHARS = 2000


RETRYING = "retrying"
INTERRUPTED = "processing_interrupted"
_CODED = re.compile(r"([a-z][a-z0-9_]{0,63}): (.*)", re.DOTALL)


def job_error(code: str, message: str) -> str:
    """The `error` column's text: a stable code, then the detail (`code: message`)."""
    return f"{code}: {message}"[:MAX_ERROR_CHARS]


def split_job_error(stored: str) -> tuple[str, str]:
    """(code, message) of an `error` column; rows written before codes were stored read as
    `ingestion_failed` with the whole text."""
    coded = _CODED.fullmatch(stored)
    return (coded.group(1), coded.group(2)) if coded else ("ingestion_failed", stored)


class JobLimitReached(Exception):
    """The tenant already has `limit` jobs queued or processing; no job was created."""

    def __init__(self, tenant_id: str, limit: int) -> None:
        super().__init__(f"tenant {tenant_id!r} already has {limit} active jobs")
        self.tenant_id = tenant_id
        self.limit = limit


class JobRow(Base):
    __tablename__ = "jobs"

    job_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    document_id: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(255))
    stored_path: Mapped[str] = mapped_column(String(1024))
    size_bytes: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), index=True)
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    progress_stage: Mapped[str] = mapped_column(String(32), default="queued")
    chunks_indexed: Mapped[int] = mapped_column(Integer, default=0)
    pages: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


@dataclass(frozen=True)
class JobRecord:
    """A job as the API and workers see it (detached from any session)."""

    job_id: str
    tenant_id: str
    document_id: str
    source: str
    stored_path: str
    size_bytes: int
    status: JobStatus
    progress_done: int
    progress_total: int
    progress_stage: str
    chunks_indexed: int
    pages: int
    error: str | None
    attempts: int
    created_at: datetime
    updated_at: datetime


def _record(row: JobRow) -> JobRecord:
    return JobRecord(
        job_id=row.job_id,
        tenant_id=row.tenant_id,
        document_id=row.document_id,
        source=row.source,
        stored_path=row.stored_path,
        size_bytes=row.size_bytes,
        status=row.status,  # type: ignore[arg-type]
        progress_done=row.progress_done,
        progress_total=row.progress_total,
        progress_stage=row.progress_stage,
        chunks_indexed=row.chunks_indexed,
        pages=row.pages,
        error=row.error,
        attempts=row.attempts,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


class JobStore:
    """Durable job state in the service database."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def create(
        self,
        tenant_id: str,
        document_id: str,
        source: str,
        stored_path: str,
        size_bytes: int,
        *,
        active_limit: int | None = None,
        document_sha256: str | None = None,
    ) -> JobRecord:
        """Queue a job for a stored upload; `source` must already be sanitised.

        With `active_limit`, JobLimitReached is raised and nothing is written when the tenant
        already has that many jobs queued or processing. With `document_sha256`, the document's
        row (status queued) is created in the same transaction unless the tenant already has one,
        which is kept as it is: a worker never sees the job without its document, and a refused
        job leaves no row behind.
        """
        now = utc_now()
        row = JobRow(
            job_id="job_" + secrets.token_hex(12),
            tenant_id=tenant_id,
            document_id=document_id,
            source=source,
            stored_path=stored_path,
            size_bytes=size_bytes,
            status="queued",
            progress_done=0,
            progress_total=0,
            progress_stage="queued",
            chunks_indexed=0,
            pages=0,
            error=None,
            attempts=0,
            created_at=now,
            updated_at=now,
        )
        with self._db.session() as session:
            if active_limit is not None and self._db.dialect == "postgresql":
                key = advisory_key(f"jobs-create:{tenant_id}")
                session.execute(select(func.pg_advisory_xact_lock(key)))
            if session.execute(_insert_below_limit(row, active_limit)).first() is None:
                assert active_limit is not None  # only the limit makes the INSERT skip its row
                raise JobLimitReached(tenant_id, active_limit)
            if document_sha256 is not None:
                insert_missing_document(
                    session, tenant_id, document_id, source, size_bytes, document_sha256
                )
        return _record(row)

    def get(self, tenant_id: str, job_id: str) -> JobRecord | None:
        """The tenant's job, or None when it is missing or belongs to another tenant."""
        with self._db.session() as session:
            row = session.scalars(
                select(JobRow).where(JobRow.tenant_id == tenant_id, JobRow.job_id == job_id)
            ).first()
            return _record(row) if row else None

    def claim_next(self) -> JobRecord | None:
        """Move the oldest queued job to processing and return it; None when nothing is queued."""
        with self._db.session() as session:
            if self._db.dialect == "postgresql":
                return self._claim_locked(session, None)
            return self._claim_conditional(session, None)

    def claim(self, job_id: str) -> JobRecord | None:
        """Claim one specific queued job (for queues that deliver ids); None if not queued."""
        with self._db.session() as session:
            if self._db.dialect == "postgresql":
                return self._claim_locked(session, job_id)
            return self._claim_conditional(session, job_id)

    def _claim_locked(self, session: Session, job_id: str | None) -> JobRecord | None:
        query = select(JobRow).where(JobRow.status == "queued")
        if job_id is not None:
            query = query.where(JobRow.job_id == job_id)
        query = query.order_by(JobRow.created_at, JobRow.job_id).limit(1)
        row = session.scalars(query.with_for_update(skip_locked=True)).first()
        if row is None:
            return None
        row.status = "processing"
        row.attempts += 1
        row.progress_stage = "starting"
        row.updated_at = utc_now()
        session.flush()
        return _record(row)

    def _claim_conditional(self, session: Session, job_id: str | None) -> JobRecord | None:
        # One statement: SQLite takes the write lock before evaluating the subquery, so two
        # claimers can never both see the same row as queued.
        candidate = select(JobRow.job_id).where(JobRow.status == "queued")
        if job_id is not None:
            candidate = candidate.where(JobRow.job_id == job_id)
        candidate = candidate.order_by(JobRow.created_at, JobRow.job_id).limit(1)
        statement = (
            update(JobRow)
            .where(JobRow.job_id == candidate.scalar_subquery(), JobRow.status == "queued")
            .values(
                status="processing",
                attempts=JobRow.attempts + 1,
                progress_stage="starting",
                updated_at=utc_now(),
            )
            .returning(JobRow)
        )
        row = session.scalars(statement, execution_options={"synchronize_session": False}).first()
        return _record(row) if row else None

    def update_progress(self, job_id: str, done: int, total: int, stage: str) -> None:
        """Record progress of a processing job (also its heartbeat for `requeue_stale`)."""
        with self._db.session() as session:
            session.execute(
                update(JobRow)
                .where(JobRow.job_id == job_id, JobRow.status == "processing")
                .values(
                    progress_done=done,
                    progress_total=total,
                    progress_stage=stage,
                    updated_at=utc_now(),
                )
            )

    def mark_done(self, job_id: str, chunks_indexed: int, pages: int) -> None:
        """Finish a job successfully."""
        with self._db.session() as session:
            session.execute(
                update(JobRow)
                .where(JobRow.job_id == job_id)
                .values(
                    status="done",
                    chunks_indexed=chunks_indexed,
                    pages=pages,
                    progress_stage="done",
                    error=None,
                    updated_at=utc_now(),
                )
            )

    def mark_failed(self, job_id: str, error: str, code: str = "ingestion_failed") -> None:
        """Finish a job with a stable code and a message (shown to users only for codes of
        client-side errors, see `app.errors.public_job_error`)."""
        message = job_error(code, error.strip() or "ingestion failed for an unknown reason")
        with self._db.session() as session:
            session.execute(
                update(JobRow)
                .where(JobRow.job_id == job_id)
                .values(
                    status="failed",
                    error=message,
                    progress_stage="failed",
                    updated_at=utc_now(),
                )
            )

    def heartbeat(self, job_id: str) -> bool:
        """Touch a processing job so `requeue_stale` leaves it alone; False if it is not ours."""
        with self._db.session() as session:
            result = session.execute(
                update(JobRow)
                .where(JobRow.job_id == job_id, JobRow.status == "processing")
                .values(updated_at=utc_now())
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def release(self, job_id: str, reason: str) -> None:
        """Put a processing job back in the queue after a transient failure, saying why (the
        reason is for operators: the API shows only that the job will be retried)."""
        with self._db.session() as session:
            session.execute(
                update(JobRow)
                .where(JobRow.job_id == job_id, JobRow.status == "processing")
                .values(
                    status="queued",
                    progress_stage="retrying",
                    error=job_error(RETRYING, reason.strip() or "transient failure"),
                    updated_at=utc_now(),
                )
            )

    def has_queued(self, tenant_id: str) -> bool:
        """Whether the tenant has a job waiting to be claimed."""
        with self._db.session() as session:
            waiting = session.scalar(
                select(JobRow.job_id)
                .where(JobRow.tenant_id == tenant_id, JobRow.status == "queued")
                .limit(1)
            )
            return waiting is not None

    def queued_since(self, older_than_s: float, limit: int = 500) -> list[tuple[str, int]]:
        """(job id, attempts) of jobs queued and untouched for `older_than_s`, oldest first."""
        cutoff = utc_now() - timedelta(seconds=older_than_s)
        with self._db.session() as session:
            rows = session.execute(
                select(JobRow.job_id, JobRow.attempts)
                .where(JobRow.status == "queued", JobRow.updated_at < cutoff)
                .order_by(JobRow.updated_at, JobRow.job_id)
                .limit(limit)
            )
            return [(str(job_id), int(attempts)) for job_id, attempts in rows]

    def requeue_stale(self, stale_after_s: float | None = None, max_attempts: int = 3) -> int:
        """Put jobs left `processing` by a crash back in the queue; returns how many.

        With `stale_after_s=None` every processing job is requeued (single-process start-up,
        when no worker can be running yet). With a number, only jobs whose heartbeat
        (`updated_at`) is older, so live workers in other processes keep their jobs. A job that
        has already been attempted `max_attempts` times is failed instead: a file that kills
        the process every time must not crash-loop the service.
        """
        now = utc_now()
        stale = [JobRow.status == "processing"]
        if stale_after_s is not None:
            stale.append(JobRow.updated_at < now - timedelta(seconds=stale_after_s))
        with self._db.session() as session:
            session.execute(
                update(JobRow)
                .where(*stale, JobRow.attempts >= max_attempts)
                .values(
                    status="failed",
                    error=job_error(
                        INTERRUPTED,
                        f"processing was interrupted {max_attempts} times; the file may be "
                        "crashing the parser. Check it opens, or upload it in another format",
                    ),
                    progress_stage="failed",
                    updated_at=now,
                )
            )
            requeued = session.execute(
                update(JobRow)
                .where(*stale)
                .values(status="queued", progress_stage="queued", updated_at=now)
            )
            return int(requeued.rowcount)  # type: ignore[attr-defined]


def _insert_below_limit(row: JobRow, active_limit: int | None) -> ReturningInsert[str]:
    # One statement, INSERT ... SELECT <the row> WHERE (active jobs of the tenant) < limit: it
    # inserts nothing, and returns no id, once the limit is reached. SQLite takes the write lock
    # before evaluating the count (it must be the transaction's first statement, as it is here);
    # PostgreSQL relies on the caller's advisory lock and READ COMMITTED, where each statement
    # sees what earlier holders of the lock committed.
    columns = JobRow.__table__.columns
    values = select(*(literal(getattr(row, c.key), c.type).label(c.key) for c in columns))
    if active_limit is not None:
        active = (
            select(func.count())
            .select_from(JobRow)
            .where(JobRow.tenant_id == row.tenant_id, JobRow.status.in_(ACTIVE_STATUSES))
            .scalar_subquery()
        )
        values = values.where(active < active_limit)
    return insert(JobRow).from_select([c.key for c in columns], values).returning(JobRow.job_id)
