"""Run one claimed ingestion job and record how it ended, whichever backend claimed it.

Jobs are durable rows: a worker receives only ids, claims a job atomically, records progress and
every failure on the job, and removes the upload file once the job has ended either way. A
transient failure (a server unreachable) may put the job back for a retry instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from app import metrics, tracing
from app.errors import IngestionError, ProviderUnavailable, RagError
from app.jobs.store import JobRecord, JobStore
from app.services.documents import DocumentDeps, index_document
from app.storage.documents import DocumentStore

log = logging.getLogger(__name__)

INTERNAL_FAILURE = "internal error while indexing; the upload was not indexed, try again later"


@dataclass(frozen=True)
class IngestDeps:
    """What running ingestion jobs needs, built by the container of the process that runs jobs
    (the API's pool or a worker)."""

    jobs: JobStore
    documents: DocumentStore
    # The documents service's collaborators, got inside each job: building them may reach a
    # model server (the embedder's dimension probe), and a server down then must fail the job
    # as retryable, like any other transient failure, not the worker.
    indexing: Callable[[], DocumentDeps]
    # job id -> the trace carrier of the request that queued it (None: tracing is off).
    trace_of: Callable[[str], Mapping[str, str]] | None = None


def is_transient(exc: BaseException) -> bool:
    """Whether a failure is an unreachable server (worth retrying), not a problem of the file."""
    if isinstance(exc, ProviderUnavailable):
        return True
    # chromadb's HttpClient surfaces a down server as httpx transport errors.
    return isinstance(exc, ConnectionError | TimeoutError | httpx.TransportError)


def run_job(deps: IngestDeps, job: JobRecord, *, may_retry: bool = False) -> bool:
    """Index one claimed job and record how it ended; never raises.

    With `may_retry`, a transient failure puts the job back in the queue (the upload is kept)
    and False is returned, so the caller schedules the retry; otherwise every failure is final.
    The job's span continues the trace of the upload that queued it.
    """
    carrier = deps.trace_of(job.job_id) if deps.trace_of is not None else {}
    with tracing.continued(carrier, "job.index", job__id=job.job_id, job__attempt=job.attempts):
        return _run_job(deps, job, may_retry=may_retry)


def _run_job(deps: IngestDeps, job: JobRecord, *, may_retry: bool) -> bool:
    path = Path(job.stored_path)
    jobs = deps.jobs
    keep_upload = False
    started = time.perf_counter()

    def progress(done: int, total: int, stage: str) -> None:
        jobs.update_progress(job.job_id, done, total, stage)

    try:
        if deps.documents.get(job.tenant_id, job.document_id) is None:
            raise IngestionError("the document was deleted before it could be indexed")
        result = index_document(
            deps.indexing(),
            job.tenant_id,
            path,
            job.source,
            progress,
            must_exist=True,
            # A burst of uploads rebuilds the tenant's keyword index once, after its last job.
            refresh_keywords=not jobs.has_queued(job.tenant_id),
        )
        jobs.mark_done(
            job.job_id,
            chunks_indexed=result.chunks,
            pages=result.pages,
            warnings=result.ocr.warnings,
        )
        log.info("job done", extra={"job_id": job.job_id, "chunks": result.chunks})
        metrics.ingested(result.pages, result.chunks)
        metrics.job_finished("done", time.perf_counter() - started)
    except Exception as exc:
        keep_upload = settle_failure(deps, job, exc, may_retry=may_retry)
        metrics.job_duration(time.perf_counter() - started)
        return not keep_upload
    finally:
        if not keep_upload:
            path.unlink(missing_ok=True)
    return True


def settle_failure(deps: IngestDeps, job: JobRecord, exc: Exception, *, may_retry: bool) -> bool:
    """Record how a job failed; True when it was put back for a retry (its upload is kept),
    else the upload is removed."""
    if may_retry and is_transient(exc):
        # The detail stays in the job row and the log; GET /jobs shows only "retrying".
        deps.jobs.release(job.job_id, f"attempt {job.attempts} failed, will retry: {exc}")
        log.warning("job will be retried", extra={"job_id": job.job_id, "error": str(exc)})
        metrics.job_finished("retried")
        return True
    metrics.job_finished("failed")
    # The upload goes before the job is seen failed: a client that sees the failure finds no
    # file left behind (and a rerun after a crash here would fail the same way).
    Path(job.stored_path).unlink(missing_ok=True)
    if isinstance(exc, RagError):
        _fail(deps, job, exc.message, exc.code)
        log.warning(
            "job failed",
            extra={"job_id": job.job_id, "code": exc.code, "detail": exc.message},
        )
    else:
        log.error("job crashed", exc_info=exc, extra={"job_id": job.job_id})
        _fail(deps, job, INTERNAL_FAILURE, "internal_error")
    return False


def _fail(deps: IngestDeps, job: JobRecord, message: str, code: str) -> None:
    deps.jobs.mark_failed(job.job_id, message, code)
    documents = deps.documents
    record = documents.get(job.tenant_id, job.document_id)
    if record is not None and record.chunks == 0:  # a failed replacement keeps the old version
        documents.set_status(job.tenant_id, job.document_id, "failed")
