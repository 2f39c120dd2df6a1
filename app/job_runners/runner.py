"""Run claimed ingestion jobs and record how each ended, whichever backend claimed them.

Jobs are durable rows: a worker receives only ids, claims jobs atomically (a batch of one
tenant's small jobs, or one), has the indexing service index their files together
(`index_documents`: each file parsed and quota-checked alone, the chunks embedded and stored
together), then records every job's own outcome and removes its upload once it has ended
either way. A transient failure (a server unreachable) may put a job back for a retry instead.
A crash leaves the jobs `processing`; they are re-queued like any other job, and stable chunk
ids make the retry an upsert, so nothing is lost or duplicated.

Every run of a job has a total time limit (RAG_JOB_TIMEOUT_S, on every backend): past it the
parse child is stopped, or the next stage does not start, and the job fails with `job_timeout`.
A long scan OCRs its pages in turns (RAG_OCR_PAGES_PER_TURN): after each turn, if another
tenant's job is waiting, it goes back to the queue behind it, and resumes from the pages kept.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from app import metrics, tracing
from app.errors import JobPaused, ProviderUnavailable, RagError, unreachable_server_errors
from app.ingestion.ocr_checkpoint import checkpoint_of
from app.ingestion.parse_turn import ParseTurn
from app.jobs.store import JobDone, JobKind, JobProgress, JobRecord, JobStore
from app.services.blocks.pipeline import FileProgress, IngestedDocument
from app.services.indexing import DocumentDeps, IndexOutcome, IndexRequest, index_documents
from app.services.webhooks import DocumentEvents, EventType
from app.storage.documents import DocumentStore

log = logging.getLogger(__name__)

INTERNAL_FAILURE = "internal error while indexing; the upload was not indexed, try again later"


@dataclass(frozen=True)
class IngestDeps:
    """What running ingestion jobs needs, built by the container of the process that runs jobs
    (the API's pool or a worker)."""

    jobs: JobStore
    documents: DocumentStore
    # The indexing service's collaborators, got inside each batch: building them may reach a
    # model server (the embedder's dimension probe), and a server down then must fail the jobs
    # as retryable, like any other transient failure, not the worker.
    indexing: Callable[[], DocumentDeps]
    # job id -> the trace carrier of the request that queued it (None: tracing is off).
    trace_of: Callable[[str], Mapping[str, str]] | None = None
    job_timeout_s: float | None = None  # RAG_JOB_TIMEOUT_S: one run of a batch, in all
    ocr_pages_per_turn: int = 0  # RAG_OCR_PAGES_PER_TURN (0: a scan never yields)
    # tenant -> whether the next claim would serve another tenant (None: nobody ever waits).
    others_waiting: Callable[[str], bool] | None = None
    # Told of a job put back after a turn (the Redis backend sends it a new message).
    on_paused: Callable[[JobRecord], None] | None = None
    events: DocumentEvents | None = None  # webhooks hear of documents indexed or failed
    # How this process runs each kind of job that runs alone (deleting a collection, an
    # evaluation run), recording how it ended; a job of a kind missing here fails.
    run_alone: Mapping[JobKind, Callable[[JobRecord], None]] = field(default_factory=dict)


def is_transient(exc: BaseException) -> bool:
    """Whether a failure is an unreachable server (worth retrying), not a problem of the file."""
    return isinstance(exc, (ProviderUnavailable, *unreachable_server_errors()))


def run_jobs(
    deps: IngestDeps, jobs: list[JobRecord], *, max_attempts: int | None = None
) -> list[str]:
    """Index claimed jobs of one tenant together, each ending on its own; never raises.

    Returns the ids of jobs put back in the queue after a transient failure (only jobs tried
    fewer than `max_attempts` times; None: never), whose retries the caller schedules; every
    other job ends done or failed. The batch's span continues the trace of the upload that
    queued its first job. A job that deletes a collection runs on its own, before the others;
    so does an evaluation run (always claimed alone).
    """
    for job in jobs:
        if job.kind != "index":
            _run_alone(deps, job)
    jobs = [j for j in jobs if j.kind == "index"]
    if not jobs:
        return []
    first = jobs[0]
    with tracing.continued(
        _carrier(deps, first),
        "job.index",
        job__id=first.job_id,
        job__attempt=first.attempts,
        job__count=len(jobs),
    ):
        return _run_jobs(deps, jobs, max_attempts)


def _carrier(deps: IngestDeps, job: JobRecord) -> Mapping[str, str]:
    """The trace carrier of the request that queued the job (empty: tracing is off)."""
    return deps.trace_of(job.job_id) if deps.trace_of is not None else {}


def _run_alone(deps: IngestDeps, job: JobRecord) -> None:
    """Run a job that is not indexing with the runner of its kind, in its own span."""
    with tracing.continued(_carrier(deps, job), f"job.{job.kind}", job__id=job.job_id):
        run = deps.run_alone.get(job.kind)
        if run is None:
            deps.jobs.mark_failed(job.job_id, f"this process cannot run {job.kind} jobs")
            return
        run(job)


def _run_jobs(deps: IngestDeps, jobs: list[JobRecord], max_attempts: int | None) -> list[str]:
    started = time.perf_counter()
    store = deps.jobs
    tenant = jobs[0].tenant_id
    alone = len(jobs) == 1
    turn = _turn(deps, tenant)

    def progress_of(job: JobRecord) -> Callable[[int, int, str], None]:
        def progress(done: int, total: int, stage: str) -> None:
            turn.check()  # past the job's deadline: stop here (the parse child with it)
            # "parsed" is followed at once by the job's "embedding" (0 of its chunks): only
            # that one is written.
            if stage != "parsed":
                store.update_progress(job.job_id, done, total, stage)

        return progress

    def embedding(reports: list[FileProgress]) -> None:
        turn.check()  # before each embedding call
        if reports[-1].file == len(jobs) - 1 and all(r.done == r.total for r in reports):
            return  # every file embedded: the jobs' ends are recorded moments later instead
        assert indexing is not None
        if all(r.done == 0 for r in reports) and (
            sum(r.total for r in reports) <= indexing.pipeline.batch_size
        ):
            return  # embedded in one call: the next news is the jobs' ends
        store.update_progress_many(
            [JobProgress(jobs[r.file].job_id, r.done, r.total, "embedding") for r in reports]
        )

    indexing: DocumentDeps | None = None
    try:
        indexing = deps.indexing()  # a server down here fails (or retries) every job of the batch
        outcomes: list[IndexOutcome] = index_documents(
            indexing,
            tenant_id=tenant,
            requests=[
                IndexRequest(
                    Path(job.stored_path),
                    job.source,
                    progress_of(job),
                    turn=replace(turn, checkpoint=checkpoint_of(Path(job.stored_path))),
                    document_id=job.document_id,
                )
                for job in jobs
            ],
            must_exist=True,
            refresh_keywords=lambda: False,  # once the jobs are recorded (below)
            embedding_progress=embedding,
        )
    except Exception as exc:  # the collaborators could not be built
        outcomes = [exc] * len(jobs)
    for job, outcome in zip(jobs, outcomes, strict=True):
        if isinstance(outcome, JobPaused):
            _pause(deps, job)
    done = [(j, o) for j, o in zip(jobs, outcomes, strict=True) if isinstance(o, IngestedDocument)]
    failures = {
        j.job_id: o
        for j, o in zip(jobs, outcomes, strict=True)
        if isinstance(o, Exception) and not isinstance(o, JobPaused)
    }
    try:
        _finish(deps, done, time.perf_counter() - started if alone else None)
    except Exception as exc:  # not recorded: each of them fails (or is retried) instead
        failures.update((job.job_id, exc) for job, _ in done)
    if indexing is not None and done:
        _refresh_keywords(indexing, store, tenant)
    retried = []
    for job in jobs:
        failure = failures.get(job.job_id)
        if failure is None:
            continue
        if settle_failure(
            deps, job, failure, may_retry=max_attempts is not None and job.attempts < max_attempts
        ):
            retried.append(job.job_id)  # its upload stays for the retry
        elif alone:
            metrics.job_duration(time.perf_counter() - started)
    return retried


def _refresh_keywords(indexing: DocumentDeps, store: JobStore, tenant: str) -> None:
    """Bring the tenant's keyword index up to date after its jobs were recorded done, unless
    another of its jobs is queued or running: the last batch of a burst does it, once. Never
    raises (a query finds the index stale and brings it up to date itself).

    The jobs' ends come first, so a client waiting on them is not kept waiting for the index:
    queries check the index is current, so one that comes right after still finds the new
    documents. Checking after the commit makes sure some batch refreshes: of two batches
    ending at once, the later check sees the other one ended.
    """
    try:
        if not store.has_unfinished(tenant):
            indexing.refresh_keywords(tenant)
    except Exception:
        log.exception("keyword index refresh after indexing failed; the next query rebuilds it")


def _turn(deps: IngestDeps, tenant: str) -> ParseTurn:
    """The time limit and OCR turns of a run of the tenant's jobs, starting now."""
    limit = deps.job_timeout_s
    deadline = None if limit is None else time.monotonic() + limit
    others = deps.others_waiting
    if others is None or deps.ocr_pages_per_turn <= 0:
        return ParseTurn(deadline, limit or 0.0)
    return ParseTurn(deadline, limit or 0.0, None, deps.ocr_pages_per_turn, lambda: others(tenant))


def _pause(deps: IngestDeps, job: JobRecord) -> None:
    """Put a job that yielded after a turn of OCR back in the queue (its upload and the pages
    it read stay for its next turn). Never raises: a job that could not be put back stays
    `processing` and is re-queued like one a crash left (its pages are kept either way)."""
    try:
        deps.jobs.pause(job.job_id)
        log.info("job paused for other tenants' jobs", extra={"job_id": job.job_id})
        if deps.on_paused is not None:
            deps.on_paused(job)
    except Exception:
        log.exception("could not put a paused job back in the queue", extra={"job_id": job.job_id})


def _finish(
    deps: IngestDeps, done: list[tuple[JobRecord, IngestedDocument]], seconds: float | None
) -> None:
    """Record jobs done, in one transaction, and remove their uploads (before anyone waiting
    hears of the end: a client that sees the job done finds no file left behind)."""
    if not done:
        return

    def remove_uploads() -> None:
        for job, _ in done:
            _remove_upload(job)

    deps.jobs.mark_done_many(
        [JobDone(job.job_id, d.chunks, d.pages, d.ocr.warnings) for job, d in done],
        before_ringing=remove_uploads,
    )
    for job, d in done:
        log.info("job done", extra={"job_id": job.job_id, "chunks": d.chunks})
        metrics.ingested(d.pages, d.chunks)
        metrics.job_finished("done", seconds)
        _announce(deps, job, "document.indexed", "done")


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
    _remove_upload(job)
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


def _remove_upload(job: JobRecord) -> None:
    """Remove a job's upload and the OCR pages kept for it, once it has ended."""
    upload = Path(job.stored_path)
    upload.unlink(missing_ok=True)
    checkpoint_of(upload).unlink(missing_ok=True)


def _fail(deps: IngestDeps, job: JobRecord, message: str, code: str) -> None:
    # The document's state first: a client that sees the job failed finds the document failed.
    documents = deps.documents
    record = documents.get(job.tenant_id, job.document_id)
    if record is not None and record.chunks == 0:  # a failed replacement keeps the old version
        documents.set_status(job.tenant_id, job.document_id, "failed")
    deps.jobs.mark_failed(job.job_id, message, code)
    _announce(deps, job, "document.failed", "failed", error_code=code)


def _announce(
    deps: IngestDeps,
    job: JobRecord,
    event_type: EventType,
    status: str,
    error_code: str | None = None,
) -> None:
    """Tell the webhooks how a job's document ended."""
    if deps.events is not None:
        deps.events.document(
            tenant_id=job.tenant_id,
            event_type=event_type,
            document_id=job.document_id,
            source=job.source,
            status=status,
            job_id=job.job_id,
            error_code=error_code,
        )
