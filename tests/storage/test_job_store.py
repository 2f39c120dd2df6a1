"""Durable ingestion jobs on SQLite and PostgreSQL: scoping, the per-tenant limit, claiming under
contention, recovery.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from app.jobs.store import JobLimitReached, JobRecord, JobStore, StoredUpload, new_job_id
from app.storage.db import Database, open_database, utc_now
from app.storage.documents import DocumentStore
from app.storage.tables import DocumentRow, JobRow
from tests.queued_jobs import ROOMY, jobs_watched, mark_done, mark_indexed, queue_job

pytestmark = pytest.mark.integration


@pytest.fixture
def jobs(sql_database: Database) -> JobStore:
    return JobStore(sql_database)


def queue(jobs: JobStore, tenant: str = "acme", name: str = "report.pdf") -> str:
    job = queue_job(jobs, tenant, f"doc_{name}", name, f"/data/uploads/{name}.bin", 1234)
    return job.job_id


def test_queued_job_is_visible_to_its_tenant_only(jobs: JobStore) -> None:
    job_id = queue(jobs)
    job = jobs.get("acme", job_id)
    assert job is not None
    assert (job.status, job.source, job.size_bytes, job.attempts) == (
        "queued",
        "report.pdf",
        1234,
        0,
    )
    assert (job.progress_done, job.progress_total, job.chunks_indexed, job.error) == (0, 0, 0, None)
    assert job.created_at.tzinfo is not None and job.created_at == job.updated_at
    assert jobs.get("globex", job_id) is None
    assert jobs.get("acme", "job_missing") is None


def test_claim_next_takes_jobs_oldest_first_then_reports_empty(jobs: JobStore) -> None:
    first, second = queue(jobs, name="a.pdf"), queue(jobs, name="b.pdf")
    claimed = jobs.claim_next()
    assert claimed is not None and claimed.job_id == first
    assert (claimed.status, claimed.attempts) == ("processing", 1)
    assert jobs.get("acme", first).status == "processing"  # type: ignore[union-attr]
    again = jobs.claim_next()
    assert again is not None and again.job_id == second
    assert jobs.claim_next() is None


def test_claim_of_a_specific_job_happens_once(jobs: JobStore) -> None:
    job_id = queue(jobs)
    assert jobs.claim(job_id) is not None
    assert jobs.claim(job_id) is None
    assert jobs.claim("job_missing") is None


def test_concurrent_threads_never_claim_the_same_job(jobs: JobStore) -> None:
    created = {queue(jobs, tenant=f"t{i % 3}", name=f"f{i}.txt") for i in range(60)}
    claimed: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(6)

    def worker() -> None:
        start.wait()
        while (job := jobs.claim_next()) is not None:
            with lock:
                claimed.append(job.job_id)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(claimed) == len(set(claimed)) == 60
    assert set(claimed) == created


def _claim_all_in_child(
    url: str, start: threading.Barrier, results: multiprocessing.Queue[list[str]]
) -> None:
    database = Database(url)
    store = JobStore(database)
    ids = []
    start.wait(timeout=60)  # all children connected: they really compete
    while (job := store.claim_next()) is not None:
        ids.append(job.job_id)
    database.dispose()
    results.put(ids)


def test_concurrent_processes_never_claim_the_same_job(
    jobs: JobStore, sql_database: Database
) -> None:
    created = {queue(jobs, name=f"f{i}.txt") for i in range(40)}
    context = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue[list[str]] = context.Queue()
    start = context.Barrier(3)
    children = [
        context.Process(target=_claim_all_in_child, args=(sql_database.url, start, results))
        for _ in range(3)
    ]
    for child in children:
        child.start()
    per_child = [results.get(timeout=120) for _ in children]
    print("jobs claimed per process:", [len(ids) for ids in per_child])
    claimed = [job_id for ids in per_child for job_id in ids]
    for child in children:
        child.join(timeout=30)
        assert child.exitcode == 0
    assert len(claimed) == len(set(claimed)) == 40
    assert set(claimed) == created


def test_progress_done_and_failed_are_recorded(jobs: JobStore) -> None:
    ok, bad = queue(jobs, name="ok.pdf"), queue(jobs, name="bad.pdf")
    jobs.update_progress(ok, 1, 5, "parsing")  # not claimed yet: ignored
    assert jobs.get("acme", ok).progress_stage == "queued"  # type: ignore[union-attr]

    jobs.claim(ok)
    jobs.update_progress(ok, 3, 5, "parsing")
    job = jobs.get("acme", ok)
    assert job is not None
    assert (job.progress_done, job.progress_total, job.progress_stage) == (3, 5, "parsing")
    assert job.updated_at > job.created_at

    mark_done(jobs, ok, chunks_indexed=42, pages=5)
    job = jobs.get("acme", ok)
    assert job is not None
    assert (job.status, job.chunks_indexed, job.pages, job.error_code, job.error) == (
        "done",
        42,
        5,
        None,
        None,
    )

    jobs.claim(bad)
    jobs.mark_failed(bad, "the PDF is encrypted; upload an unencrypted copy", "encrypted_document")
    job = jobs.get("acme", bad)
    assert job is not None
    assert job.status == "failed"
    assert (job.error_code, job.error) == (
        "encrypted_document",
        "the PDF is encrypted; upload an unencrypted copy",
    )


def test_a_failure_always_carries_a_message(jobs: JobStore) -> None:
    empty, huge = queue(jobs, name="a"), queue(jobs, name="b")
    jobs.mark_failed(empty, "   ")
    jobs.mark_failed(huge, "x" * 10_000)
    assert jobs.get("acme", empty).error  # type: ignore[union-attr]
    assert len(jobs.get("acme", huge).error or "") <= 2000  # type: ignore[union-attr]


def test_requeue_stale_returns_crashed_jobs_to_the_queue(jobs: JobStore) -> None:
    first, second, finished = (queue(jobs, name=n) for n in ("a", "b", "c"))
    for _ in range(3):
        jobs.claim_next()
    mark_done(jobs, finished, 1, 1)

    assert jobs.requeue_stale() == 2
    assert {jobs.get("acme", j).status for j in (first, second)} == {"queued"}  # type: ignore[union-attr]
    assert jobs.get("acme", finished).status == "done"  # type: ignore[union-attr]
    reclaimed = jobs.claim_next()
    assert reclaimed is not None and reclaimed.job_id == first and reclaimed.attempts == 2


def test_requeue_stale_with_a_threshold_spares_live_workers(
    jobs: JobStore, sql_database: Database
) -> None:
    stuck, alive = queue(jobs, name="stuck"), queue(jobs, name="alive")
    jobs.claim(stuck)
    jobs.claim(alive)
    with sql_database.session() as session:
        session.execute(
            update(JobRow)
            .where(JobRow.job_id == stuck)
            .values(updated_at=utc_now() - timedelta(minutes=10))
        )
    jobs.update_progress(alive, 1, 2, "embedding")  # a heartbeat

    assert jobs.requeue_stale(stale_after_s=300) == 1
    assert jobs.get("acme", stuck).status == "queued"  # type: ignore[union-attr]
    assert jobs.get("acme", alive).status == "processing"  # type: ignore[union-attr]


def test_a_job_that_keeps_crashing_is_failed_not_retried_forever(jobs: JobStore) -> None:
    job_id = queue(jobs, name="poison.pdf")
    for _ in range(3):
        assert jobs.claim(job_id) is not None
        jobs.requeue_stale(max_attempts=3)
    job = jobs.get("acme", job_id)
    assert job is not None
    assert job.status == "failed" and job.attempts == 3
    assert "interrupted 3 times" in (job.error or "")


# Through a reservation taken before the body is read, or in the transaction that queues a small
# upload's job: the same limit either way.
RESERVED = pytest.mark.parametrize("reserved", [True, False], ids=["reserved", "unreserved"])


@RESERVED
def test_the_active_limit_counts_queued_and_processing_jobs_of_one_tenant(
    jobs: JobStore, reserved: bool
) -> None:
    queued, processing, done, failed = (queue(jobs, name=n) for n in "abcd")
    queue(jobs, tenant="globex")
    for job_id in (processing, done, failed):
        jobs.claim(job_id)
    mark_done(jobs, done, 1, 1)
    jobs.mark_failed(failed, "broken")

    # acme has 2 active jobs: a third fits under 3, a fourth does not.
    third = queue_job(
        jobs, "acme", "doc_e", "e", "/data/uploads/e.bin", 1, active_limit=3, reserved=reserved
    )
    assert jobs.get("acme", third.job_id) is not None
    with pytest.raises(JobLimitReached) as refused:
        queue_job(
            jobs, "acme", "doc_f", "f", "/data/uploads/f.bin", 1, active_limit=3, reserved=reserved
        )
    assert (refused.value.tenant_id, refused.value.limit) == ("acme", 3)
    with pytest.raises(JobLimitReached):
        queue_job(
            jobs,
            "globex",
            "doc_g",
            "g",
            "/data/uploads/g.bin",
            1,
            active_limit=1,
            reserved=reserved,
        )
    queue_job(
        jobs, "initech", "doc_h", "h", "/data/uploads/h.bin", 1, active_limit=1, reserved=reserved
    )
    # A finished job frees its place.
    jobs.claim(queued)
    mark_done(jobs, queued, 1, 1)
    queue_job(
        jobs, "acme", "doc_f", "f", "/data/uploads/f.bin", 1, active_limit=3, reserved=reserved
    )


def _job_ids(database: Database, tenant: str) -> set[str]:
    with database.session() as session:
        return set(session.scalars(select(JobRow.job_id).where(JobRow.tenant_id == tenant)))


def _document_ids(database: Database, tenant: str) -> set[str]:
    with database.session() as session:
        query = select(DocumentRow.document_id).where(DocumentRow.tenant_id == tenant)
        return set(session.scalars(query))


@RESERVED
def test_concurrent_uploads_never_exceed_the_active_limit(
    jobs: JobStore, sql_database: Database, reserved: bool
) -> None:
    attempts = [("acme", i) for i in range(8)] + [("globex", i) for i in range(2)]
    created: list[tuple[str, str, str]] = []
    refused: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(len(attempts))

    def upload(tenant: str, i: int) -> None:
        start.wait(timeout=60)
        try:
            job = queue_job(
                jobs,
                tenant,
                f"doc_{i}",
                f"f{i}.txt",
                f"/data/uploads/{tenant}-{i}.bin",
                10,
                active_limit=3,
                document_sha256="0" * 64,
                reserved=reserved,
            )
        except JobLimitReached:
            with lock:
                refused.append(tenant)
            return
        with lock:
            created.append((tenant, job.job_id, job.document_id))

    threads = [threading.Thread(target=upload, args=attempt) for attempt in attempts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    acme = [(job_id, doc_id) for tenant, job_id, doc_id in created if tenant == "acme"]
    assert len(acme) == 3 and refused == ["acme"] * 5
    assert _job_ids(sql_database, "acme") == {job_id for job_id, _ in acme}
    # A refused job left no document row; an accepted one has its row.
    assert _document_ids(sql_database, "acme") == {doc_id for _, doc_id in acme}
    assert len(_job_ids(sql_database, "globex")) == 2  # another tenant has its own budget


def test_a_queued_job_comes_with_its_document_row_but_keeps_an_existing_one(
    jobs: JobStore, sql_database: Database
) -> None:
    documents = DocumentStore(sql_database)
    queue_job(
        jobs, "acme", "doc_new", "new.txt", "/data/uploads/n.bin", 12, document_sha256="a" * 64
    )
    row = documents.get("acme", "doc_new")
    assert row is not None
    assert (row.status, row.source, row.size_bytes, row.content_sha256, row.chunks) == (
        "queued",
        "new.txt",
        12,
        "a" * 64,
        0,
    )

    documents.upsert("acme", "doc_old", "old.txt", 5, "b" * 64, status="done")
    mark_indexed(documents, "acme", "doc_old", pages=1, chunks=7)
    queue_job(
        jobs, "acme", "doc_old", "old.txt", "/data/uploads/o.bin", 99, document_sha256="c" * 64
    )
    kept = documents.get("acme", "doc_old")
    assert kept is not None
    assert (kept.status, kept.chunks, kept.size_bytes, kept.content_sha256) == (
        "done",
        7,
        5,
        "b" * 64,
    )

    with pytest.raises(JobLimitReached):
        queue_job(
            jobs,
            "acme",
            "doc_refused",
            "r.txt",
            "/u/r.bin",
            1,
            active_limit=2,
            document_sha256="d" * 64,
        )
    assert documents.get("acme", "doc_refused") is None
    assert len(_job_ids(sql_database, "acme")) == 2


def test_a_request_of_unreserved_uploads_is_queued_whole_or_not_at_all(
    jobs: JobStore, sql_database: Database
) -> None:
    queue(jobs, name="first.txt")
    uploads = [
        StoredUpload(new_job_id(), f"doc_{n}", f"{n}.txt", f"/u/{n}.bin", 3, "e" * 64)
        for n in ("x", "y")
    ]
    # One slot left of 2: the second upload does not fit, so neither is queued.
    with pytest.raises(JobLimitReached):
        jobs.fill_reservations("acme", uploads, ROOMY, active_limit=2)
    assert len(_job_ids(sql_database, "acme")) == 1
    assert _document_ids(sql_database, "acme") == {"doc_first.txt"}
    queued = jobs.fill_reservations("acme", uploads, ROOMY, active_limit=3)
    assert [(job.status, job.source) for job in queued] == [
        ("queued", "x.txt"),
        ("queued", "y.txt"),
    ]
    assert _document_ids(sql_database, "acme") == {"doc_first.txt", "doc_x", "doc_y"}


def test_jobs_survive_a_restart(jobs: JobStore, sql_database: Database) -> None:
    job_id = queue(jobs)
    sql_database.dispose()
    reopened = open_database(sql_database.url)
    try:
        job = JobStore(reopened).get("acme", job_id)
        assert job is not None and job.status == "queued"
    finally:
        reopened.dispose()


def test_the_end_of_a_job_rings_its_watchers_after_the_commit(jobs: JobStore) -> None:
    # What `GET /jobs/{id}?wait=` waits on: rung for the job that ended, done or failed, once
    # its end is readable; not for another job, and not after the watch is left.
    done_id, failed_id, other_id = (
        queue(jobs, name="a.pdf"),
        queue(jobs, name="b.pdf"),
        queue(jobs, name="c.pdf"),
    )
    seen: list[tuple[str, str]] = []

    def watcher(job_id: str) -> Callable[[JobRecord], None]:
        def wake(ended: JobRecord) -> None:
            # Handed the job as its end committed: what a read of it returns now.
            assert ended == jobs.get("acme", job_id)
            seen.append((ended.job_id, ended.status))

        return wake

    with (
        jobs.endings.watching(done_id, watcher(done_id)),
        jobs.endings.watching(failed_id, watcher(failed_id)),
        jobs.endings.watching(other_id, watcher(other_id)),
    ):
        for _ in range(3):
            jobs.claim_next()
        mark_done(jobs, done_id, chunks_indexed=3, pages=1)
        jobs.mark_failed(failed_id, "unreadable", "corrupt_document")
        jobs.update_progress(other_id, 1, 2, "embedding")
    assert seen == [(done_id, "done"), (failed_id, "failed")]
    assert jobs_watched(jobs.endings) == 0
    mark_done(jobs, other_id, chunks_indexed=1, pages=1)  # nobody watches any more
    assert seen == [(done_id, "done"), (failed_id, "failed")]
    done = jobs.get("acme", done_id)
    assert done is not None and (done.progress_done, done.progress_total) == (3, 3)
