"""Index several claimed jobs of one tenant together, each still ending on its own.

Many small uploads are slow one at a time because each pays fixed costs: an embedding call for a
chunk or two, a Chroma upsert, a transaction of chunk rows, a cache invalidation and a keyword
index refresh. A batch parses and chunks every file on its own (a file that fails fails only its
job), then embeds all their chunks in full batches, stores them in one write, and records each
document and job separately. If the shared step fails (embedder or store), each job of the batch
is run again alone, so every job gets the outcome it would have had by itself. A crash leaves the
jobs `processing`; they are re-queued like any other job, and stable chunk ids make the retry an
upsert, so nothing is lost or duplicated.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from app import metrics
from app.errors import IngestionError
from app.jobs.runner import IngestDeps, run_job, settle_failure
from app.jobs.store import JobRecord, JobStore
from app.services.documents import (
    DocumentDeps,
    chunk_allowance,
    file_sha256,
    ocr_allowance,
    record_indexed,
)
from app.services.pipeline import (
    IngestedDocument,
    ParsedFile,
    check_chunk_quota,
    job_stage,
    parse_file,
)

log = logging.getLogger(__name__)


@dataclass
class _Prepared:
    """A job whose file is parsed and within quota, waiting for the shared embedding."""

    job: JobRecord
    parsed: ParsedFile
    sha256: str
    replaces_chunks: int  # of the version this upload replaces (0 for a new document)


def run_jobs(
    deps: IngestDeps, jobs: list[JobRecord], *, max_attempts: int | None = None
) -> list[str]:
    """Index claimed jobs of one tenant, small files together; never raises.

    Returns the ids of jobs put back in the queue after a transient failure (only jobs tried
    fewer than `max_attempts` times; None: never), whose retries the caller schedules; every
    other job ends done or failed.
    """
    may_retry = _RetryPolicy(max_attempts)
    if len(jobs) == 1:
        job = jobs[0]
        return [] if run_job(deps, job, may_retry=may_retry(job)) else [job.job_id]
    retried: list[str] = []
    for segment in _distinct_documents(jobs):
        retried += _run_together(deps, segment, may_retry)
    return retried


@dataclass(frozen=True)
class _RetryPolicy:
    """Whether a job may be put back after a transient failure (it has attempts left)."""

    max_attempts: int | None

    def __call__(self, job: JobRecord) -> bool:
        return self.max_attempts is not None and job.attempts < self.max_attempts


def _distinct_documents(jobs: list[JobRecord]) -> list[list[JobRecord]]:
    """Split into consecutive runs without a repeated document, so a re-upload of the same
    name in one batch still replaces the earlier version in order."""
    segments: list[list[JobRecord]] = [[]]
    seen: set[str] = set()
    for job in jobs:
        if job.document_id in seen:
            segments.append([])
            seen.clear()
        segments[-1].append(job)
        seen.add(job.document_id)
    return segments


def _run_together(deps: IngestDeps, jobs: list[JobRecord], may_retry: _RetryPolicy) -> list[str]:
    tenant = jobs[0].tenant_id
    retried: list[str] = []
    prepared: list[_Prepared] = []
    added = 0  # chunks this batch adds to the tenant before the next file's quota check
    for job in jobs:
        try:
            ready = _prepare(deps, job, added)
        except Exception as exc:
            _settle(deps, job, exc, may_retry, retried)
            continue
        prepared.append(ready)
        added += len(ready.parsed.chunks) - ready.replaces_chunks
    if not prepared:
        return retried
    indexing = deps.indexing()  # built while preparing: no server is contacted again here
    try:
        with job_stage("embed"):
            vectors = _embed(indexing, deps.jobs, prepared)
        with job_stage("store"):
            indexing.corpus.replace_documents(
                tenant,
                [
                    (p.parsed.document_id, p.parsed.chunks, v)
                    for p, v in zip(prepared, vectors, strict=True)
                ],
            )
    except Exception:
        # Not a problem of one file: let each job meet the failure (or success) on its own.
        log.warning(
            "batch of %d jobs failed; running them one by one", len(prepared), exc_info=True
        )
        for ready in prepared:
            if not run_job(deps, ready.job, may_retry=may_retry(ready.job)):
                retried.append(ready.job.job_id)
        return retried
    try:
        for ready in prepared:
            _finish(deps, ready, may_retry, retried)
    finally:
        indexing.cache.invalidate_tenant(tenant)
        # As for single jobs: a burst rebuilds the keyword index once, after its last job.
        if not deps.jobs.has_queued(tenant):
            indexing.refresh_keywords(tenant)
    return retried


def _prepare(deps: IngestDeps, job: JobRecord, added: int) -> _Prepared:
    indexing = deps.indexing()  # a server down here fails (or retries) this job alone
    record = deps.documents.get(job.tenant_id, job.document_id)
    if record is None:
        raise IngestionError("the document was deleted before it could be indexed")
    path = Path(job.stored_path)
    sha = file_sha256(path)

    def progress(done: int, total: int, stage: str) -> None:
        deps.jobs.update_progress(job.job_id, done, total, stage)

    parsed = parse_file(
        path,
        tenant_id=job.tenant_id,
        source=job.source,
        config=indexing.pipeline,
        progress=progress,
        ocr_pages_allowed=ocr_allowance(indexing, job.tenant_id, job.document_id),
    )
    allowance = chunk_allowance(indexing, job.tenant_id, parsed.document_id) - added
    check_chunk_quota(parsed, max(allowance, 0))
    return _Prepared(job, parsed, sha, record.chunks)


def _embed(
    indexing: DocumentDeps, jobs: JobStore, prepared: list[_Prepared]
) -> list[list[list[float]]]:
    """Embed the batch's chunks in full batches, recording each job's progress as it goes."""
    texts = [(i, chunk.text) for i, p in enumerate(prepared) for chunk in p.parsed.chunks]
    size = indexing.pipeline.batch_size  # RAG_EMBEDDING_BATCH_SIZE
    vectors: list[list[list[float]]] = [[] for _ in prepared]
    for start in range(0, len(texts), size):
        part = texts[start : start + size]
        embedded = indexing.embedder.embed_documents([text for _, text in part])
        for (owner, _), vector in zip(part, embedded, strict=True):
            vectors[owner].append(vector)
        jobs.update_progress_many(
            [
                (prepared[owner].job.job_id, len(vectors[owner]), len(p.parsed.chunks), "embedding")
                for owner, p in sorted({owner: prepared[owner] for owner, _ in part}.items())
            ]
        )
    return vectors


def _finish(
    deps: IngestDeps, ready: _Prepared, may_retry: _RetryPolicy, retried: list[str]
) -> None:
    job, parsed = ready.job, ready.parsed
    done = IngestedDocument(
        parsed.document_id, parsed.source, parsed.pages, len(parsed.chunks), parsed.ocr
    )
    try:
        record_indexed(
            deps.indexing(),
            job.tenant_id,
            done,
            Path(job.stored_path),
            ready.sha256,
            must_exist=True,
        )
        deps.jobs.mark_done(
            job.job_id, chunks_indexed=done.chunks, pages=done.pages, warnings=done.ocr.warnings
        )
        log.info("job done", extra={"job_id": job.job_id, "chunks": done.chunks})
        metrics.ingested(done.pages, done.chunks)
        metrics.job_finished("done")
    except Exception as exc:
        _settle(deps, job, exc, may_retry, retried)
        return
    Path(job.stored_path).unlink(missing_ok=True)


def _settle(
    deps: IngestDeps,
    job: JobRecord,
    exc: Exception,
    may_retry: _RetryPolicy,
    retried: list[str],
) -> None:
    if settle_failure(deps, job, exc, may_retry=may_retry(job)):
        retried.append(job.job_id)  # its upload stays for the retry
