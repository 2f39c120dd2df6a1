"""A bounded in-process pool of threads that run queued ingestion jobs from the job table.

Each free thread claims the fairest queued job (`JobStore.claim_next`: tenants with fewer
running jobs, then the one served least recently), so one tenant's burst cannot starve another.

Jobs are durable rows: a worker receives only ids, claims a job atomically, records progress and
every failure on the job, and removes the upload file once the job has ended either way. Jobs a
crash left `processing` are re-queued at start-up; stable chunk ids make the retry an upsert.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import httpx

from app.errors import IngestionError, ProviderUnavailable, RagError
from app.services.container import Container
from app.services.documents import index_document
from app.storage.jobs import JobRecord

log = logging.getLogger(__name__)

INTERNAL_FAILURE = "internal error while indexing; the upload was not indexed, try again later"


def is_transient(exc: BaseException) -> bool:
    """Whether a failure is an unreachable server (worth retrying), not a problem of the file."""
    if isinstance(exc, ProviderUnavailable):
        return True
    # chromadb's HttpClient surfaces a down server as httpx transport errors.
    return isinstance(exc, ConnectionError | TimeoutError | httpx.TransportError)


def run_job(container: Container, job: JobRecord, *, may_retry: bool = False) -> bool:
    """Index one claimed job and record how it ended; never raises.

    With `may_retry`, a transient failure puts the job back in the queue (the upload is kept)
    and False is returned, so the caller schedules the retry; otherwise every failure is final.
    """
    path = Path(job.stored_path)
    jobs = container.jobs
    keep_upload = False

    def progress(done: int, total: int, stage: str) -> None:
        jobs.update_progress(job.job_id, done, total, stage)

    try:
        if container.documents.get(job.tenant_id, job.document_id) is None:
            raise IngestionError("the document was deleted before it could be indexed")
        result = index_document(
            container,
            job.tenant_id,
            path,
            job.source,
            progress,
            must_exist=True,
            # A burst of uploads rebuilds the tenant's keyword index once, after its last job.
            refresh_keywords=not jobs.has_queued(job.tenant_id),
        )
        jobs.mark_done(job.job_id, chunks_indexed=result.chunks, pages=result.pages)
        log.info("job done", extra={"job_id": job.job_id, "chunks": result.chunks})
    except Exception as exc:
        keep_upload = settle_failure(container, job, exc, may_retry=may_retry)
        return not keep_upload
    finally:
        if not keep_upload:
            path.unlink(missing_ok=True)
    return True


def settle_failure(
    container: Container, job: JobRecord, exc: Exception, *, may_retry: bool
) -> bool:
    """Record how a job failed; True when it was put back for a retry (keep its upload)."""
    if may_retry and is_transient(exc):
        container.jobs.release(job.job_id, f"attempt {job.attempts} failed, will retry: {exc}")
        log.warning("job will be retried", extra={"job_id": job.job_id, "error": str(exc)})
        return True
    if isinstance(exc, RagError):
        _fail(container, job, f"{exc.message}")
        log.warning("job failed", extra={"job_id": job.job_id, "code": exc.code})
    else:
        log.error("job crashed", exc_info=exc, extra={"job_id": job.job_id})
        _fail(container, job, INTERNAL_FAILURE)
    return False


def _fail(container: Container, job: JobRecord, message: str) -> None:
    container.jobs.mark_failed(job.job_id, message)
    record = container.documents.get(job.tenant_id, job.document_id)
    if record is not None and record.chunks == 0:  # a failed replacement keeps the old version
        container.documents.set_status(job.tenant_id, job.document_id, "failed")


class IngestWorkerPool:
    """`size` daemon threads taking queued jobs until stopped."""

    def __init__(self, container: Container, size: int, poll_interval_s: float = 1.0) -> None:
        self._container = container
        self._size = size
        self._poll = poll_interval_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._max_running = container.settings.max_running_jobs_per_tenant

    def start(self) -> int:
        """Re-queue jobs a crash left processing, then start the threads; returns re-queued."""
        requeued = self._container.jobs.requeue_stale()
        if requeued:
            log.warning("re-queued interrupted jobs", extra={"count": requeued})
        for i in range(self._size):
            thread = threading.Thread(target=self._loop, name=f"ingest-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return requeued

    def notify(self) -> None:
        """Wake idle workers because a job was queued."""
        self._wake.set()

    def enqueue(self, job: JobRecord) -> None:
        """Hand over a newly queued job: the threads poll the table, so just wake them."""
        self._wake.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the threads to finish their current job and exit."""
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads.clear()

    def _loop(self) -> None:
        from app.services.ingest_batch import run_jobs

        settings = self._container.settings
        while not self._stop.is_set():
            try:
                batch = self._container.jobs.claim_batch(
                    self._max_running,
                    max_jobs=settings.ingest_batch_jobs,
                    max_bytes=settings.ingest_batch_bytes,
                )
            except Exception:
                log.exception("could not claim a job")
                batch = []
            if not batch:
                self._wake.wait(self._poll)
                self._wake.clear()
                continue
            run_jobs(self._container, batch)
