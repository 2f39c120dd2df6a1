"""The durable ingestion jobs: the API creates and polls, workers claim and report.

A job moves (reserved ->) queued -> processing -> done | failed. `claim_next` hands each queued
job to exactly one worker, across threads and processes, with one conditional UPDATE: SQLite
serialises writers, and PostgreSQL claimers first take one transaction-scoped advisory lock, so
the same job is never handed out twice and the fairness counts each claimer reads are exact.

`reserve` never lets a tenant exceed its `active_limit`, however many uploads race: the row is
inserted by one conditional INSERT ... SELECT that counts the tenant's active jobs. SQLite
evaluates it under the write lock; PostgreSQL first takes a per-tenant advisory lock for the
transaction, so the count of the next creator already sees this one's job.

An upload reserves its slot (a `reserved` row) before its body is read, so a tenant over its
queue quota is refused before anything is written to disk; `fill_reservations` turns the rows
of a request's stored files into queued jobs, checking the tenant's storage quotas in that same
transaction.

Claims are fair across tenants: `claim_next` takes the oldest queued job of the tenant with the
fewest running jobs, and among those the tenant served least recently (`job_tenant_turns`), so
a tenant's single upload waits for at most one job per worker of a tenant with hundreds queued.

`claim_batch` hands a worker several of that one tenant's oldest queued jobs at once (small
files are indexed together: one embedding pass, one store write). A batch is one turn and one
running slot of its tenant, not one per job: its members are recorded in `job_batch_members`,
and the running count that fairness and the per-tenant limit read counts a batch once. Each job
of a batch still ends on its own (done, failed, or put back for a retry).
"""

from __future__ import annotations

import functools
import json
import secrets
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import (
    ColumnElement,
    Select,
    bindparam,
    delete,
    false,
    func,
    insert,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import ReturningInsert

from app.domain import ListedPage, QueueBacklog
from app.errors import QuotaExceeded
from app.jobs.endings import JobEndings
from app.jobs.scheduling import RETRYING, ClaimScope, fair_tenant, in_scope, next_batch
from app.storage.audit import AuditEntry, write_entry
from app.storage.db import Database, advisory_key, affected_rows, conflict_insert, utc_now
from app.storage.documents import insert_missing_document, usage_beside
from app.storage.records import count_rows, listed_page, record_of
from app.storage.tables import BatchMemberRow, DocumentRow, JobRow, TenantTurnRow, table_of

if TYPE_CHECKING:
    from app.config import Settings

JobStatus = Literal["reserved", "queued", "processing", "done", "failed"]
# What a job does: index an upload, delete a collection with its documents, or run an
# evaluation set (its results go to the evaluation tables; the job's id is the run's).
JobKind = Literal["index", "collection_delete", "evaluation_run"]
COLLECTION_DELETE: JobKind = "collection_delete"
EVALUATION_RUN: JobKind = "evaluation_run"
# Every job that counts against the tenant's queue quota (a reservation is an upload in flight).
ACTIVE_STATUSES: tuple[JobStatus, ...] = ("reserved", "queued", "processing")
MAX_ERROR_CHARS = 2000
# A reservation whose upload neither finished nor failed this long (the API process died while
# receiving it) is dropped by `requeue_stale`.
RESERVATION_TTL_S = 3600.0
INTERRUPTED = "processing_interrupted"


def _job_error(code: str, message: str) -> dict[str, str]:
    """The values of a job's error columns: its stable code and the detail, cut to size."""
    return {"error_code": code, "error": message[:MAX_ERROR_CHARS]}


class JobLimitReached(Exception):
    """The tenant already has `limit` jobs queued or processing; no job was created."""

    def __init__(self, tenant_id: str, limit: int) -> None:
        super().__init__(f"tenant {tenant_id!r} already has {limit} active jobs")
        self.tenant_id = tenant_id
        self.limit = limit


@dataclass(frozen=True)
class StorageQuota:
    """Per-tenant limits checked when an upload becomes a job."""

    documents: int
    stored_bytes: int
    chunks: int

    @classmethod
    def from_settings(cls, settings: Settings) -> StorageQuota:
        """RAG_QUOTA_DOCUMENTS, RAG_QUOTA_STORED_BYTES and RAG_QUOTA_CHUNKS."""
        return cls(
            documents=settings.quota_documents,
            stored_bytes=settings.quota_stored_bytes,
            chunks=settings.quota_chunks,
        )


@dataclass(frozen=True)
class StoredUpload:
    """An upload on disk, to become the queued job its reservation (`job_id`) holds."""

    job_id: str
    document_id: str
    source: str
    stored_path: str
    size_bytes: int
    document_sha256: str


@dataclass(frozen=True)
class JobProgress:
    """How far a processing job is: `done` of `total` units of its current `stage`."""

    job_id: str
    done: int
    total: int
    stage: str


@dataclass(frozen=True)
class JobDone:
    """A job that ended well: what it indexed, and what it could not do (`warnings`)."""

    job_id: str
    chunks_indexed: int
    pages: int
    warnings: Sequence[str] = ()
    units: int | None = None  # its progress's units, when not chunks (documents deleted)


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
    # Why the job failed, or why its last attempt did: a stable code (`error_code`, what the
    # API and clients branch on) and the detail for operators (`error`); both None otherwise.
    error_code: str | None
    error: str | None
    attempts: int
    created_at: datetime
    updated_at: datetime
    # What a done job could not do (pages OCR could not read), one line each.
    warnings: tuple[str, ...] = ()
    kind: JobKind = "index"
    collection_id: str | None = None  # the collection a `collection_delete` job deletes
    requested_by: str | None = None  # who asked for the job (an upload's uploader)

    @property
    def progress(self) -> JobProgress:
        """How far the job is: `done` of `total` units of its current stage."""
        return JobProgress(
            self.job_id, self.progress_done, self.progress_total, self.progress_stage
        )


# The tenant's job by id (what a waiting client reads): built once, so each read skips
# rebuilding the statement and its cache key.
_JOBS = table_of(JobRow).columns
_JOB_OF_TENANT = select(*_JOBS).where(
    _JOBS.tenant_id == bindparam("tenant_id"), _JOBS.job_id == bindparam("job_id")
)


_UNFINISHED_OF_TENANT = (
    select(JobRow.job_id)
    .where(JobRow.tenant_id == bindparam("tenant_id"), JobRow.status.in_(("queued", "processing")))
    .limit(1)
)


@functools.cache
def _claimable(scope: ClaimScope) -> Select[Any]:
    """A job a claimer of `scope` could be handed now, if any (built once per scope)."""
    waiting = [JobRow.status == "queued", JobRow.progress_stage != RETRYING, in_scope(scope)]
    return select(JobRow.job_id).where(*waiting).limit(1)


def _record(row: JobRow | Row[Any]) -> JobRecord:
    warnings = tuple(json.loads(row.warnings)) if row.warnings else ()
    return record_of(JobRecord, row, warnings=warnings)


class JobStore:
    """Durable job state in the service database."""

    def __init__(self, database: Database) -> None:
        self._db = database
        # Rung after a job's end commits, for clients waiting on it in this process.
        self.endings: JobEndings[JobRecord] = JobEndings()

    def reserve(self, tenant_id: str, active_limit: int) -> str:
        """Hold one of the tenant's job slots for an upload about to be received; its id.

        Raises JobLimitReached, writing nothing, when the tenant already has `active_limit`
        jobs reserved, queued or processing.
        """
        row = _new_reservation(tenant_id)
        with self._db.session() as session:
            self._lock_tenant(session, tenant_id)
            _insert_below_limit(session, row, active_limit)
        return row.job_id

    def fill_reservations(
        self,
        tenant_id: str,
        uploads: list[StoredUpload],
        quota: StorageQuota,
        uploaded_by: str | None = None,
        audit: Sequence[AuditEntry] = (),
        placement: Mapping[str, str] | None = None,
        *,
        active_limit: int | None = None,
    ) -> list[JobRecord]:
        """Turn the reservations of stored uploads into queued jobs, all or none, within `quota`.

        With `active_limit`, the uploads hold no reservation (a small request, read before any
        slot was taken): their jobs are inserted queued in this transaction while the tenant has
        fewer than `active_limit` jobs reserved, queued or processing, else JobLimitReached and
        nothing is written.

        Raises QuotaExceeded (nothing changes; the caller cancels the reservations) when the
        uploads, taken in order, would exceed the tenant's documents, stored bytes or chunks.
        Each document's row is created in the same transaction unless the tenant already has
        one, which is kept as it is (a worker never sees a job without its document); LookupError
        when a reservation no longer exists. The audit entries are written in that transaction,
        and `placement` (the documents' collection and metadata) with the rows, so no worker
        indexes a document before it is in its collection.
        """
        now = utc_now()
        with self._db.session() as session:
            self._lock_tenant(session, tenant_id)
            # The jobs' writes first: on SQLite the first takes the write lock, so the usage reads
            # below and the document rows are one serialised step against every other upload of
            # the tenant. Each returns its queued row.
            if active_limit is None:
                queued = [
                    self._queue_reserved(session, tenant_id, u, now, uploaded_by) for u in uploads
                ]
            else:
                queued = [
                    _insert_below_limit(
                        session,
                        _new_job_row(tenant_id, u, "queued", now, uploaded_by),
                        active_limit,
                    )
                    for u in uploads
                ]
            if any(row is None for row in queued):
                raise LookupError("an upload's job reservation no longer exists")
            for upload in uploads:
                _check_storage_quota(
                    session, tenant_id, upload.document_id, upload.size_bytes, quota
                )
                # Later uploads of this request see this one's row in their quota check.
                insert_missing_document(
                    session,
                    tenant_id,
                    upload.document_id,
                    upload.source,
                    upload.size_bytes,
                    upload.document_sha256,
                    uploaded_by,
                    placement,
                )
            for entry in audit:
                write_entry(session, entry)
            return [_record(row) for row in queued if row is not None]

    @staticmethod
    def _queue_reserved(
        session: Session,
        tenant_id: str,
        upload: StoredUpload,
        now: datetime,
        uploaded_by: str | None,
    ) -> JobRow | None:
        """The upload's reservation made its queued job, in `session`; None if it is gone."""
        statement = (
            update(JobRow)
            .where(
                JobRow.job_id == upload.job_id,
                JobRow.tenant_id == tenant_id,
                JobRow.status == "reserved",
            )
            .values(
                status="queued",
                document_id=upload.document_id,
                source=upload.source,
                stored_path=upload.stored_path,
                size_bytes=upload.size_bytes,
                created_at=now,
                updated_at=now,
                requested_by=uploaded_by,
            )
            .returning(JobRow)
        )
        options = {"synchronize_session": False}
        return session.scalars(statement, execution_options=options).first()

    def queue_collection_deletion(
        self,
        tenant_id: str,
        collection_id: str,
        name: str,
        documents: int,
        requested_by: str | None,
    ) -> JobRecord:
        """A queued job that deletes a collection's documents, then the collection; the one
        already queued or running for it when there is one (a repeated DELETE starts nothing
        new). It takes no upload slot: it frees room rather than taking any."""
        with self._db.write_session(f"jobs-create:{tenant_id}") as session:
            running = session.scalars(
                select(JobRow).where(
                    JobRow.tenant_id == tenant_id,
                    JobRow.kind == COLLECTION_DELETE,
                    JobRow.collection_id == collection_id,
                    JobRow.status.in_(("queued", "processing")),
                )
            ).first()
            if running is not None:
                return _record(running)
            row = _new_queued(tenant_id, COLLECTION_DELETE, name, requested_by, documents)
            row.collection_id = collection_id
            session.add(row)
            session.flush()
            return _record(row)

    def queue_evaluation_run(
        self,
        tenant_id: str,
        active_limit: int,
        set_name: str,
        items: int,
        requested_by: str | None,
        add_run: Callable[[Session, str], object],
    ) -> JobRecord:
        """A queued `evaluation_run` job, counted in the tenant's queue quota like an upload;
        `add_run` writes the run's own row (keyed by the job's id) in the same transaction.
        JobLimitReached, writing nothing, when the tenant already has `active_limit` jobs."""
        row = _new_queued(tenant_id, EVALUATION_RUN, set_name, requested_by, items)
        with self._db.session() as session:
            self._lock_tenant(session, tenant_id)
            _insert_below_limit(session, row, active_limit)
            add_run(session, row.job_id)
            found = session.get(JobRow, row.job_id)
            assert found is not None
            return _record(found)

    def cancel_reservation(self, tenant_id: str, job_id: str) -> None:
        """Give back a reserved slot whose upload failed or was refused."""
        with self._db.session() as session:
            session.execute(
                delete(JobRow).where(
                    JobRow.job_id == job_id,
                    JobRow.tenant_id == tenant_id,
                    JobRow.status == "reserved",
                )
            )

    def count_active(self, tenant_id: str) -> int:
        """The tenant's uploads reserved, queued or processing (its queue quota usage)."""
        with self._db.session() as session:
            return count_rows(session, JobRow, *_in_queue_quota(tenant_id))

    def _lock_tenant(self, session: Session, tenant_id: str) -> None:
        # PostgreSQL: one creator of the tenant's jobs at a time (SQLite's write lock does this).
        if self._db.dialect == "postgresql":
            key = advisory_key(f"jobs-create:{tenant_id}")
            session.execute(select(func.pg_advisory_xact_lock(key)))

    def get(self, tenant_id: str, job_id: str) -> JobRecord | None:
        """The tenant's job, or None when it is missing or belongs to another tenant.

        A reservation (an upload still being received) is returned too, with status `reserved`.
        """
        row = self._db.first_row(_JOB_OF_TENANT, {"tenant_id": tenant_id, "job_id": job_id})
        return _record(row) if row else None

    def page(
        self,
        tenant_id: str,
        statuses: Sequence[JobStatus],
        limit: int,
        offset: int = 0,
        collections: Collection[str] | None = None,
        requested_by: str | None = None,
        every_run: bool = False,
    ) -> ListedPage[JobRecord]:
        """One page of the tenant's jobs in `statuses` (never reservations), newest first, and
        how many the tenant has in them; with `collections`, only jobs of documents in them,
        deletions of them, the deletions and evaluation runs `requested_by` asked for (every
        evaluation run with `every_run`), and their uploads whose documents were deleted
        since."""
        shown = [status for status in statuses if status != "reserved"]
        where = [JobRow.tenant_id == tenant_id, JobRow.status.in_(shown)]
        if collections is not None:
            kept = sorted(collections)
            of_documents = (JobRow.kind == "index") & JobRow.document_id.in_(
                select(DocumentRow.document_id).where(
                    DocumentRow.tenant_id == tenant_id, DocumentRow.collection_id.in_(kept)
                )
            )
            asked = JobRow.requested_by == requested_by if requested_by else false()
            deleting = (JobRow.kind == COLLECTION_DELETE) & (JobRow.collection_id.in_(kept) | asked)
            evaluating = (JobRow.kind == EVALUATION_RUN) & (true() if every_run else asked)
            # An upload whose document was deleted since: its uploader still sees how it ended.
            uploaded_gone = (
                (JobRow.kind == "index")
                & asked
                & JobRow.document_id.not_in(
                    select(DocumentRow.document_id).where(DocumentRow.tenant_id == tenant_id)
                )
            )
            where.append(or_(of_documents, deleting, evaluating, uploaded_gone))
        query = select(JobRow).order_by(JobRow.created_at.desc(), JobRow.job_id)
        with self._db.session() as session:
            return listed_page(session, query, where, JobRow, limit, offset, _record)

    def claim_next(
        self, max_running_per_tenant: int | None = None, scope: ClaimScope = "all"
    ) -> JobRecord | None:
        """Move the fairest queued job to processing and return it; None when there is none.

        The fairest job is the oldest queued one of the tenant with the fewest jobs processing,
        then of the tenant served least recently, then of the tenant waiting longest. Tenants
        already running `max_running_per_tenant` jobs are skipped. Jobs waiting for a retry
        are left to their own delayed message (`claim`).
        """
        batch = self.claim_batch(max_running_per_tenant, max_jobs=1, scope=scope)
        return batch[0] if batch else None

    def claim_batch(
        self,
        max_running_per_tenant: int | None = None,
        *,
        max_jobs: int,
        max_bytes: int | None = None,
        scope: ClaimScope = "all",
        skip_tenants: frozenset[str] = frozenset(),
    ) -> list[JobRecord]:
        """Claim up to `max_jobs` queued jobs of the fairest tenant, oldest first; [] if none.

        The tenant is the one `claim_next` would serve, passing over `skip_tenants`. Its jobs
        are taken while their uploads add up to at most `max_bytes` (the first is always
        taken), so a batch stays a batch of small files. The batch counts as one running job of
        the tenant and takes one turn. Only jobs of the claimer's `scope` are taken (an
        evaluation run always alone).
        """
        chosen = next_batch(max_running_per_tenant, max_jobs, max_bytes, scope, skip_tenants)
        return self._claim_where(JobRow.job_id.in_(chosen))

    def claim(self, job_id: str) -> JobRecord | None:
        """Claim one specific queued job (a retry's own message); None if not queued."""
        claimed = self._claim_where(JobRow.job_id == job_id)
        return claimed[0] if claimed else None

    def claim_retry(self, job_id: str) -> JobRecord | None:
        """Claim a job put back for a retry, once its delayed message arrives; else None."""
        claimed = self._claim_where((JobRow.job_id == job_id) & (JobRow.progress_stage == RETRYING))
        return claimed[0] if claimed else None

    def _claim_where(self, which: Any) -> list[JobRecord]:
        """Claim the queued jobs `which` selects, in one transaction; the claimed, oldest first."""
        with self._db.session() as session:
            # One statement: SQLite takes the write lock before evaluating the subquery, and
            # PostgreSQL claimers hold the claim lock, so no two claimers see the same row queued.
            if self._db.dialect == "postgresql":
                # Claims are short; one at a time keeps the fairness counts exact across workers.
                session.execute(select(func.pg_advisory_xact_lock(advisory_key("jobs-claim"))))
            now = utc_now()
            # On the table, not the ORM class: the claimed rows come back as plain rows, with no
            # ORM bulk-update step (a sizeable part of a claim's interpreter time).
            statement = (
                update(table_of(JobRow))
                .where(which, JobRow.status == "queued")
                .values(
                    status="processing",
                    attempts=JobRow.attempts + 1,
                    progress_stage="starting",
                    updated_at=now,
                )
                .returning(*_JOBS)
            )
            rows = session.execute(statement).all()
            if not rows:
                return []
            claimed = sorted((_record(row) for row in rows), key=lambda j: (j.created_at, j.job_id))
            ids = [job.job_id for job in claimed]
            session.execute(delete(BatchMemberRow).where(BatchMemberRow.job_id.in_(ids)))
            if len(claimed) > 1:
                session.execute(
                    insert(BatchMemberRow), [{"job_id": i, "batch_id": ids[0]} for i in ids]
                )
            turn = conflict_insert(self._db.dialect, TenantTurnRow).values(
                tenant_id=claimed[0].tenant_id, served_at=now
            )
            session.execute(
                turn.on_conflict_do_update(
                    index_elements=[TenantTurnRow.tenant_id], set_={"served_at": now}
                )
            )
            return claimed

    def update_progress(self, job_id: str, done: int, total: int, stage: str) -> None:
        """Record progress of a processing job (also its heartbeat for `requeue_stale`)."""
        self.update_progress_many([JobProgress(job_id, done, total, stage)])

    def update_progress_many(self, progress: Sequence[JobProgress]) -> None:
        """`update_progress` for several jobs in one transaction."""
        now = utc_now()
        with self._db.session() as session:
            for report in progress:
                session.execute(
                    update(JobRow)
                    .where(JobRow.job_id == report.job_id, JobRow.status == "processing")
                    .values(
                        progress_done=report.done,
                        progress_total=report.total,
                        progress_stage=report.stage,
                        updated_at=now,
                    )
                )

    def mark_done_many(
        self, done: Sequence[JobDone], *, before_ringing: Callable[[], object] = lambda: None
    ) -> None:
        """Finish jobs successfully, each with what it could not do (`warnings`) if anything, in
        one transaction; `before_ringing` runs after the commit and before the jobs' watchers
        hear of the end (what a waiter must find done by then: the uploads removed)."""
        with self._db.session() as session:
            ended = _finish_many(
                session,
                {
                    job.job_id: {
                        "status": "done",
                        "chunks_indexed": job.chunks_indexed,
                        "pages": job.pages,
                        # Every chunk embedded, whatever progress was last written.
                        "progress_done": job.chunks_indexed if job.units is None else job.units,
                        "progress_total": job.chunks_indexed if job.units is None else job.units,
                        "progress_stage": "done",
                        "error_code": None,
                        "error": None,
                        "warnings": (
                            json.dumps(list(job.warnings), ensure_ascii=False)
                            if job.warnings
                            else None
                        ),
                    }
                    for job in done
                },
            )
        before_ringing()
        self.endings.ended(ended)

    def mark_failed(self, job_id: str, error: str, code: str = "ingestion_failed") -> None:
        """Finish a job with a stable code and a message (shown to users only for codes of
        client-side errors, see `app.errors.public_job_error`)."""
        detail = error.strip() or "ingestion failed for an unknown reason"
        with self._db.session() as session:
            final = {"status": "failed", "progress_stage": "failed", **_job_error(code, detail)}
            ended = _finish_many(session, {job_id: final})
        self.endings.ended(ended)

    def heartbeat(self, job_id: str, now: datetime | None = None) -> bool:
        """Touch a processing job (at `now`, default the current time) so `requeue_stale` leaves
        it alone; False if it is not ours."""
        statement = (
            update(JobRow)
            .where(JobRow.job_id == job_id, JobRow.status == "processing")
            .values(updated_at=now or utc_now())
        )
        with self._db.session() as session:
            return bool(affected_rows(session, statement))

    def release(self, job_id: str, reason: str) -> None:
        """Put a processing job back in the queue after a transient failure, saying why (the
        reason is for operators: the API shows only that the job will be retried)."""
        self._requeue(
            job_id,
            progress_stage=RETRYING,
            **_job_error(RETRYING, reason.strip() or "transient failure"),
        )

    def pause(self, job_id: str) -> None:
        """Put a processing job back in the queue after a turn of its work (a long scan gave
        its worker to other tenants' jobs); the turn is not counted as a failed attempt, and
        the progress so far stays visible."""
        # Its claim counted an attempt: take it back.
        self._requeue(job_id, progress_stage="queued", attempts=JobRow.attempts - 1)

    def _requeue(self, job_id: str, **values: Any) -> None:
        """A processing job queued again (out of its batch), with these column values."""
        with self._db.session() as session:
            session.execute(delete(BatchMemberRow).where(BatchMemberRow.job_id == job_id))
            session.execute(
                update(JobRow)
                .where(JobRow.job_id == job_id, JobRow.status == "processing")
                .values(status="queued", updated_at=utc_now(), **values)
            )

    def others_waiting(self, tenant_id: str, max_running_per_tenant: int | None) -> bool:
        """Whether the next claim would serve another tenant than `tenant_id` (one of its jobs
        is queued and it is below its running limit)."""
        with self._db.session() as session:
            chosen = session.scalar(select(fair_tenant(max_running_per_tenant)))
            return chosen is not None and chosen != tenant_id

    def has_claimable(self, scope: ClaimScope = "all") -> bool:
        """Whether any tenant has a job waiting that `claim_next` could hand out to a claimer
        of `scope` (ignoring the per-tenant running limit)."""
        return self._db.first_row(_claimable(scope), {}) is not None

    def has_unfinished(self, tenant_id: str) -> bool:
        """Whether the tenant has a job queued or processing."""
        return self._db.first_row(_UNFINISHED_OF_TENANT, {"tenant_id": tenant_id}) is not None

    def queued_summary(self, now: datetime | None = None) -> QueueBacklog:
        """How many jobs wait to be claimed, and how long (seconds) the oldest has waited by
        `now` (the current time unless given)."""
        with self._db.session() as session:
            count, oldest = session.execute(
                select(func.count(JobRow.job_id), func.min(JobRow.updated_at)).where(
                    JobRow.status == "queued"
                )
            ).one()
        if not count or oldest is None:
            return QueueBacklog(0, 0.0)
        if oldest.tzinfo is None:  # SQLite hands back naive UTC
            oldest = oldest.replace(tzinfo=UTC)
        return QueueBacklog(int(count), max(((now or utc_now()) - oldest).total_seconds(), 0.0))

    def queued_since(
        self,
        older_than_s: float,
        limit: int = 500,
        now: datetime | None = None,
        scope: ClaimScope = "all",
    ) -> list[tuple[str, int]]:
        """(job id, attempts) of jobs of `scope` queued and untouched for `older_than_s` at
        `now` (default: the current time), oldest first."""
        cutoff = (now or utc_now()) - timedelta(seconds=older_than_s)
        with self._db.session() as session:
            rows = session.execute(
                select(JobRow.job_id, JobRow.attempts)
                .where(JobRow.status == "queued", JobRow.updated_at < cutoff, in_scope(scope))
                .order_by(JobRow.updated_at, JobRow.job_id)
                .limit(limit)
            )
            return [(str(job_id), int(attempts)) for job_id, attempts in rows]

    def requeue_stale(
        self,
        stale_after_s: float | None = None,
        max_attempts: int = 3,
        now: datetime | None = None,
    ) -> int:
        """Put jobs left `processing` by a crash back in the queue; returns how many.

        With `stale_after_s=None` every processing job is requeued (single-process start-up,
        when no worker can be running yet). With a number, only jobs whose heartbeat
        (`updated_at`) is older, so live workers in other processes keep their jobs. A job that
        has already been attempted `max_attempts` times is failed instead: a file that kills
        the process every time must not crash-loop the service. `now` (default: the current
        time) is what the heartbeats' age is measured at.
        """
        now = now or utc_now()
        stale = [JobRow.status == "processing"]
        if stale_after_s is not None:
            stale.append(JobRow.updated_at < now - timedelta(seconds=stale_after_s))
        abandoned = [JobRow.status == "reserved"]
        if stale_after_s is not None:
            abandoned.append(JobRow.updated_at < now - timedelta(seconds=RESERVATION_TTL_S))
        with self._db.session() as session:
            session.execute(delete(JobRow).where(*abandoned))
            session.execute(
                update(JobRow)
                .where(*stale, JobRow.attempts >= max_attempts)
                .values(
                    status="failed",
                    **_job_error(
                        INTERRUPTED,
                        f"processing was interrupted {max_attempts} times; the file may be "
                        "crashing the parser. Check it opens, or upload it in another format",
                    ),
                    progress_stage="failed",
                    updated_at=now,
                )
            )
            return affected_rows(
                session,
                update(JobRow)
                .where(*stale)
                .values(status="queued", progress_stage="queued", updated_at=now),
            )


def _new_queued(
    tenant_id: str, kind: str, source: str, requested_by: str | None, total: int
) -> JobRow:
    """A `queued` row of a job that is not an upload (a collection's deletion, an evaluation
    run): what it works on by name, who asked, and how many steps it has."""
    row = _new_reservation(tenant_id)
    row.status = "queued"
    row.kind = kind
    row.source = source
    row.requested_by = requested_by
    row.progress_total = total
    return row


def new_job_id() -> str:
    """A fresh job id (random: ids are handed to clients and must not be guessable)."""
    return "job_" + secrets.token_hex(12)


def _new_reservation(tenant_id: str) -> JobRow:
    """A `reserved` row: the upload's document, source and size are filled in when stored."""
    empty = StoredUpload(new_job_id(), "", "", "", 0, "")
    return _new_job_row(tenant_id, empty, "reserved", utc_now(), None)


def _insert_below_limit(session: Session, row: JobRow, active_limit: int) -> JobRow:
    """Insert `row` in `session` while its tenant has fewer than `active_limit` jobs in its
    queue quota; JobLimitReached, inserting nothing, otherwise."""
    if session.execute(_INSERT_BELOW_LIMIT, _below_limit(row, active_limit)).first() is None:
        raise JobLimitReached(row.tenant_id, active_limit)
    return row


def _new_job_row(
    tenant_id: str, upload: StoredUpload, status: str, now: datetime, uploaded_by: str | None
) -> JobRow:
    """An upload's job row, nothing done yet."""
    return JobRow(
        job_id=upload.job_id,
        tenant_id=tenant_id,
        document_id=upload.document_id,
        source=upload.source,
        stored_path=upload.stored_path,
        size_bytes=upload.size_bytes,
        status=status,
        progress_done=0,
        progress_total=0,
        progress_stage="queued",
        chunks_indexed=0,
        pages=0,
        error_code=None,
        error=None,
        attempts=0,
        created_at=now,
        updated_at=now,
        warnings=None,
        kind="index",  # every column is given: the row is inserted by INSERT ... SELECT
        collection_id=None,
        requested_by=uploaded_by,
    )


def _check_storage_quota(
    session: Session, tenant_id: str, document_id: str, size_bytes: int, quota: StorageQuota
) -> None:
    """Raise QuotaExceeded if storing this upload (new or replacing) passes a quota."""
    others, replaced = usage_beside(session, tenant_id, document_id)
    replaces = replaced.documents > 0
    if not replaces and others.documents + 1 > quota.documents:
        raise QuotaExceeded(
            "documents",
            f"tenant quota exceeded: documents (limit {quota.documents}); delete documents "
            "before uploading new ones",
        )
    if others.stored_bytes + size_bytes > quota.stored_bytes:
        raise QuotaExceeded(
            "stored_bytes",
            f"tenant quota exceeded: stored_bytes (limit {quota.stored_bytes} bytes, "
            f"{others.stored_bytes} used by other documents, this file is {size_bytes}); delete "
            "documents to make room",
        )
    if others.chunks >= quota.chunks:
        raise QuotaExceeded(
            "chunks",
            f"tenant quota exceeded: chunks (limit {quota.chunks}, {others.chunks} used); "
            "delete documents to make room",
        )


def _in_queue_quota(tenant_id: str | ColumnElement[str]) -> tuple[ColumnElement[bool], ...]:
    """Which jobs count against the tenant's queue quota: its uploads reserved, queued or
    processing (the quota is of uploads: a collection's deletion does not count)."""
    return (
        JobRow.tenant_id == tenant_id,
        JobRow.status.in_(ACTIVE_STATUSES),
        JobRow.kind != COLLECTION_DELETE,
    )


def _build_insert_below_limit() -> ReturningInsert[str]:
    # One statement, INSERT ... SELECT <the row> WHERE (active jobs of the tenant) < limit: it
    # inserts nothing, and returns no id, once the limit is reached. SQLite takes the write lock
    # before evaluating the count (it must be the transaction's first statement, as it is here);
    # PostgreSQL relies on the caller's advisory lock and READ COMMITTED, where each statement
    # sees what earlier holders of the lock committed. Built once, the row and the limit bound
    # as parameters (`_below_limit`): every upload runs it.
    jobs = table_of(JobRow)
    active = (
        select(func.count())
        .select_from(jobs)
        .where(*_in_queue_quota(bindparam("quota_tenant_id")))
        .scalar_subquery()
    )
    values = select(
        *(bindparam(f"row_{c.key}", type_=c.type).label(c.key) for c in jobs.columns)
    ).where(active < bindparam("active_limit"))
    return insert(jobs).from_select([c.key for c in jobs.columns], values).returning(jobs.c.job_id)


_INSERT_BELOW_LIMIT = _build_insert_below_limit()


def _below_limit(row: JobRow, active_limit: int) -> dict[str, Any]:
    """The parameters of `_INSERT_BELOW_LIMIT` for inserting `row`."""
    values = {f"row_{c.key}": getattr(row, c.key) for c in table_of(JobRow).columns}
    return {**values, "quota_tenant_id": row.tenant_id, "active_limit": active_limit}


def _finish_many(session: Session, finals: Mapping[str, Mapping[str, Any]]) -> list[JobRecord]:
    """End jobs in `session`, each with its own final column values (the same columns for
    every job): the jobs as ended, in the order given (none for ids that do not exist)."""
    if not finals:
        return []
    ids = list(finals)
    now = utc_now()
    # Three statements for the batch: the batch left, the jobs ended (executemany), read back.
    # Leaving the batch and the final status are one transaction: a finished job is never
    # still a batch member, and a batch member is never finished.
    session.execute(delete(BatchMemberRow).where(BatchMemberRow.job_id.in_(ids)))
    jobs = table_of(JobRow)
    columns = next(iter(finals.values())).keys()
    ending = (
        update(jobs)
        .where(jobs.c.job_id == bindparam("ended_job_id"))
        .values({name: bindparam(name) for name in (*columns, "updated_at")})
    )
    session.execute(
        ending,
        [{**final, "ended_job_id": job_id, "updated_at": now} for job_id, final in finals.items()],
    )
    rows = {
        row.job_id: row for row in session.scalars(select(JobRow).where(JobRow.job_id.in_(ids)))
    }
    return [_record(rows[job_id]) for job_id in ids if job_id in rows]
