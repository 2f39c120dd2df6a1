"""Fair job claims and upload reservations on SQLite and PostgreSQL.

Claims are made one at a time here, with no worker running ("gated" workers), so the order in
which jobs would reach workers is exact and can be asserted.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import update

from app.errors import QuotaExceeded
from app.jobs.store import JobLimitReached, JobStore, StorageQuota, StoredUpload
from app.storage.db import Database, utc_now
from app.storage.documents import DocumentStore
from app.storage.tables import JobRow
from tests.queued_jobs import ROOMY, mark_done, mark_indexed, queue_job

pytestmark = pytest.mark.integration


@pytest.fixture
def jobs(sql_database: Database) -> JobStore:
    return JobStore(sql_database)


def fill(
    jobs: JobStore, reservation: str, name: str, size: int, quota: StorageQuota = ROOMY
) -> str:
    """Queue a stored upload of tenant acme into its reservation; returns the job id."""
    upload = StoredUpload(reservation, f"doc_{name}", name, f"/uploads/{name}", size, "ab" * 32)
    (job,) = jobs.fill_reservations("acme", [upload], quota)
    return job.job_id


def queue(jobs: JobStore, tenant: str, name: str) -> str:
    return queue_job(jobs, tenant, f"doc_{name}", name, f"/uploads/{name}", 10).job_id


def claim_order(jobs: JobStore, *, finish: bool = True, limit: int | None = None) -> list[str]:
    """Tenants of the jobs claimed one after another; each is finished before the next claim
    when `finish` (one worker), or left running (as many workers as claims)."""
    order = []
    while (job := jobs.claim_next(limit)) is not None:
        order.append(job.tenant_id)
        if finish:
            mark_done(jobs, job.job_id, 1, 1)
    return order


def test_one_worker_alternates_between_a_bulk_tenant_and_a_single_upload(jobs: JobStore) -> None:
    for i in range(6):
        queue(jobs, "bulk", f"b{i}.txt")
    queue(jobs, "single", "s.txt")  # queued after all of bulk's jobs
    order = claim_order(jobs)
    # The single upload waits behind one bulk job, not six.
    assert order == ["bulk", "single", "bulk", "bulk", "bulk", "bulk", "bulk"]


def test_three_tenants_are_served_round_robin_within_each_tenant_oldest_first(
    jobs: JobStore,
) -> None:
    created = {
        tenant: [queue(jobs, tenant, f"{tenant}{i}.txt") for i in range(3)] for tenant in "abc"
    }
    claimed = []
    while (job := jobs.claim_next()) is not None:
        claimed.append(job)
        mark_done(jobs, job.job_id, 1, 1)
    assert [job.tenant_id for job in claimed] == list("abc" * 3)
    for tenant, ids in created.items():
        assert [job.job_id for job in claimed if job.tenant_id == tenant] == ids


def test_a_tenant_with_fewer_running_jobs_goes_first(jobs: JobStore) -> None:
    for i in range(4):
        queue(jobs, "bulk", f"b{i}.txt")
    first = jobs.claim_next()
    assert first is not None and first.tenant_id == "bulk"
    queue(jobs, "late", "l.txt")
    # Two workers: the second free worker takes the tenant with nothing running.
    second = jobs.claim_next()
    assert second is not None and second.tenant_id == "late"


def test_the_per_tenant_running_limit_leaves_the_rest_queued(jobs: JobStore) -> None:
    for i in range(5):
        queue(jobs, "bulk", f"b{i}.txt")
    # Four free workers, but a tenant may run two jobs at once.
    assert claim_order(jobs, finish=False, limit=2) == ["bulk", "bulk"]
    queue(jobs, "other", "o.txt")
    assert claim_order(jobs, finish=False, limit=2) == ["other"]


def test_a_job_waiting_for_its_retry_is_claimed_only_by_its_own_message(jobs: JobStore) -> None:
    job_id = queue(jobs, "acme", "a.txt")
    assert jobs.claim_next() is not None
    jobs.release(job_id, "chroma unreachable")
    assert jobs.claim_next() is None  # its backoff is not over
    assert jobs.claim_retry("job_other") is None
    again = jobs.claim_retry(job_id)
    assert again is not None and again.job_id == job_id and again.attempts == 2
    # A fresh job is never claimed as a retry.
    fresh = queue(jobs, "acme", "b.txt")
    assert jobs.claim_retry(fresh) is None


def test_a_reservation_counts_against_the_queue_and_is_freed_on_cancel(jobs: JobStore) -> None:
    first = jobs.reserve("acme", 2)
    jobs.reserve("acme", 2)
    with pytest.raises(JobLimitReached):
        jobs.reserve("acme", 2)
    assert jobs.count_active("acme") == 2
    assert jobs.claim_next() is None  # a reservation is not a job a worker could run
    jobs.cancel_reservation("acme", first)
    assert jobs.count_active("acme") == 1
    jobs.reserve("acme", 2)
    assert jobs.reserve("other", 2)  # quotas are per tenant


def test_a_filled_reservation_is_a_queued_job_with_its_document(
    jobs: JobStore, sql_database: Database
) -> None:
    reservation = jobs.reserve("acme", 5)
    job = jobs.get("acme", fill(jobs, reservation, "a.txt", 42))
    assert job is not None
    assert (job.job_id, job.status, job.document_id, job.size_bytes) == (
        reservation,
        "queued",
        "doc_a.txt",
        42,
    )
    document = DocumentStore(sql_database).get("acme", "doc_a.txt")
    assert document is not None and document.size_bytes == 42
    claimed = jobs.claim_next()
    assert claimed is not None and claimed.job_id == reservation


@pytest.mark.parametrize(
    ("quota", "size", "name"),
    [
        (StorageQuota(documents=1, stored_bytes=10**9, chunks=10**6), 10, "documents"),
        (StorageQuota(documents=100, stored_bytes=105, chunks=10**6), 10, "stored_bytes"),
        (StorageQuota(documents=100, stored_bytes=10**9, chunks=5), 10, "chunks"),
    ],
)
def test_a_reservation_over_a_storage_quota_changes_nothing(
    jobs: JobStore, sql_database: Database, quota: StorageQuota, size: int, name: str
) -> None:
    documents = DocumentStore(sql_database)
    kept = fill(jobs, jobs.reserve("acme", 5), "kept.txt", 100)
    mark_indexed(documents, "acme", "doc_kept.txt", pages=1, chunks=5)
    mark_done(jobs, kept, 5, 1)
    reservation = jobs.reserve("acme", 5)
    with pytest.raises(QuotaExceeded) as refused:
        fill(jobs, reservation, "new.txt", size, quota)
    assert refused.value.quota == name and name in refused.value.message
    assert documents.get("acme", "doc_new.txt") is None
    still = jobs.get("acme", reservation)
    assert still is not None and still.status == "reserved"  # the caller cancels it


def test_requeue_stale_drops_abandoned_reservations_only(
    jobs: JobStore, sql_database: Database
) -> None:
    old = jobs.reserve("acme", 5)
    fresh = jobs.reserve("acme", 5)
    with sql_database.session() as session:
        session.execute(
            update(JobRow)
            .where(JobRow.job_id == old)
            .values(updated_at=utc_now() - timedelta(hours=2))
        )
    jobs.requeue_stale(stale_after_s=60)
    assert jobs.get("acme", old) is None
    assert jobs.get("acme", fresh) is not None
    jobs.requeue_stale()  # at start-up of the only API process, no upload can be in flight
    assert jobs.get("acme", fresh) is None


def test_several_uploads_are_queued_together_or_not_at_all(
    jobs: JobStore, sql_database: Database
) -> None:
    quota = StorageQuota(documents=2, stored_bytes=10**9, chunks=10**6)
    reservations = [jobs.reserve("acme", 5) for _ in range(3)]
    uploads = [
        StoredUpload(r, f"doc_{i}", f"{i}.txt", f"/u/{i}", 10, "ab" * 32)
        for i, r in enumerate(reservations)
    ]
    # The third document passes the quota of two: the first two are not queued either.
    with pytest.raises(QuotaExceeded):
        jobs.fill_reservations("acme", uploads, quota)
    assert DocumentStore(sql_database).count("acme") == 0
    assert {jobs.get("acme", r).status for r in reservations} == {"reserved"}  # type: ignore[union-attr]
    queued = jobs.fill_reservations("acme", uploads[:2], quota)
    assert [job.job_id for job in queued] == reservations[:2]
    assert [job.status for job in queued] == ["queued", "queued"]
    assert DocumentStore(sql_database).count("acme") == 2


def test_concurrent_reservations_never_exceed_the_queue_quota(jobs: JobStore) -> None:
    start = threading.Barrier(10)
    outcomes: list[str] = []

    def reserve() -> None:
        start.wait(timeout=30)
        try:
            jobs.reserve("acme", 4)
            outcomes.append("reserved")
        except JobLimitReached:
            outcomes.append("refused")

    threads = [threading.Thread(target=reserve) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["refused"] * 6 + ["reserved"] * 4
    assert jobs.count_active("acme") == 4


def sized(jobs: JobStore, tenant: str, name: str, size: int) -> str:
    return queue_job(jobs, tenant, f"doc_{name}", name, f"/uploads/{name}", size).job_id


def test_a_batch_takes_the_oldest_jobs_of_one_tenant_up_to_the_count(jobs: JobStore) -> None:
    bulk = [sized(jobs, "bulk", f"b{i}.txt", 10) for i in range(5)]
    sized(jobs, "other", "o.txt", 10)
    batch = jobs.claim_batch(max_jobs=3)
    assert [job.job_id for job in batch] == bulk[:3]
    assert {job.status for job in batch} == {"processing"}
    assert all(job.attempts == 1 and job.progress_stage == "starting" for job in batch)
    # Bulk now runs one batch; the other tenant, idle and never served, comes next.
    (other,) = jobs.claim_batch(max_jobs=3)
    assert other.tenant_id == "other"


def test_a_batch_stays_within_the_byte_cap_but_always_takes_one_job(jobs: JobStore) -> None:
    big = sized(jobs, "acme", "big.pdf", 5000)
    small = [sized(jobs, "acme", f"s{i}.txt", 400) for i in range(4)]
    (first,) = jobs.claim_batch(max_jobs=10, max_bytes=1000)
    assert first.job_id == big  # larger than the cap alone: a batch of one
    assert [job.job_id for job in jobs.claim_batch(max_jobs=10, max_bytes=1000)] == small[:2]


def test_a_batch_counts_as_one_running_job_of_its_tenant(jobs: JobStore) -> None:
    for i in range(6):
        sized(jobs, "bulk", f"b{i}.txt", 10)
    first = jobs.claim_batch(2, max_jobs=3)
    second = jobs.claim_batch(2, max_jobs=3)
    assert len(first) == len(second) == 3
    # Two batches are the tenant's two running slots: no third claim, though nothing else runs.
    assert jobs.claim_batch(2, max_jobs=3) == []
    sized(jobs, "late", "l.txt", 10)
    assert jobs.claim_next(2) is not None  # another tenant is still served
    # The slot frees only when the whole batch has ended, whichever job ends last.
    for job in first[:2]:
        mark_done(jobs, job.job_id, 1, 1)
    assert jobs.claim_batch(2, max_jobs=3) == []
    sized(jobs, "bulk", "b6.txt", 10)
    assert jobs.claim_batch(2, max_jobs=3) == []
    jobs.mark_failed(first[2].job_id, "broken file")
    assert [job.source for job in jobs.claim_batch(2, max_jobs=3)] == ["b6.txt"]


def test_one_worker_with_batches_serves_a_single_upload_after_one_batch(jobs: JobStore) -> None:
    for i in range(8):
        sized(jobs, "bulk", f"b{i}.txt", 10)
    sized(jobs, "single", "s.txt", 10)
    order = []
    while batch := jobs.claim_batch(max_jobs=4):
        order.append((batch[0].tenant_id, len(batch)))
        for job in batch:
            mark_done(jobs, job.job_id, 1, 1)
    assert order == [("bulk", 4), ("single", 1), ("bulk", 4)]


def test_a_batch_left_processing_by_a_crash_is_requeued_whole_and_claimed_again(
    jobs: JobStore,
) -> None:
    ids = [sized(jobs, "acme", f"a{i}.txt", 10) for i in range(3)]
    assert len(jobs.claim_batch(1, max_jobs=3)) == 3
    assert jobs.requeue_stale() == 3
    again = jobs.claim_batch(1, max_jobs=3)
    assert [job.job_id for job in again] == ids and {job.attempts for job in again} == {2}


def test_a_claim_passes_over_the_tenants_it_is_told_to_skip(jobs: JobStore) -> None:
    # The in-process pool leaves a tenant's new jobs to that tenant's young batch: a claim told
    # to skip it serves the next tenant in line, whatever the turn order says.
    busy = [sized(jobs, "busy", f"b{i}.txt", 10) for i in range(2)]
    other = sized(jobs, "other", "o.txt", 10)
    skip = frozenset({"busy"})
    assert [job.job_id for job in jobs.claim_batch(max_jobs=3, skip_tenants=skip)] == [other]
    assert jobs.claim_batch(max_jobs=3, skip_tenants=skip) == []  # only skipped jobs are left
    assert [job.job_id for job in jobs.claim_batch(max_jobs=3)] == busy
