"""Bursts of uploads: each is indexed, the keyword index is rebuilt once, a 300-file folder is
accepted whole, and another tenant's single upload is not starved by it."""

from __future__ import annotations

import pytest

from app.job_runners.runner import run_jobs
from testkit.builders import text_document
from tests.api.harness import ApiFactory, ApiHarness

pytestmark = pytest.mark.integration

CODES = ["QUILLMORE-17", "BRACKENFELL-42", "OSPREYLANE-93"]


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    # No worker threads: the test runs the queued jobs itself, one at a time, like one worker.
    return api_factory(start_workers=False)


def test_a_burst_rebuilds_the_keyword_index_once_and_every_document_is_found(
    api: ApiHarness,
) -> None:
    user = api.add_user("burst")
    for i, code in enumerate(CODES):
        body = text_document(f"Part {code} is the spare valve for pump line {i}.")
        assert api.upload(user, f"part{i}.txt", body).status_code == 202
    keyword = api.container.retriever.keyword_index
    rebuilds = []
    while (job := api.container.jobs.claim_next()) is not None:
        assert run_jobs(api.container.ingest_deps, [job]) == []
        rebuilds.append(keyword.rebuilds[user.tenant])
    # Two jobs left the rebuild to a later one; the last job of the burst rebuilt once.
    assert rebuilds == [0, 0, 1]
    for code in CODES:
        hits = api.search(user, code)["results"]
        assert hits and code in hits[0]["text"], (code, hits)
    assert keyword.rebuilds[user.tenant] == 1  # the searches found the index current


def test_a_lone_upload_is_keyword_searchable_without_waiting_for_a_query(
    api: ApiHarness,
) -> None:
    user = api.add_user("lone")
    assert api.upload(user, "lone.txt", text_document("Part WRENFIELD-5 fits.")).status_code == 202
    job = api.container.jobs.claim_next()
    assert job is not None and run_jobs(api.container.ingest_deps, [job]) == []
    assert api.container.retriever.keyword_index.rebuilds[user.tenant] == 1


def test_a_300_file_burst_within_the_queue_quota_is_accepted_and_indexed(
    api_factory: ApiFactory,
) -> None:
    # The default queue quota (500) takes a folder of 300 files without a single 429; the
    # tenant's jobs then run through the worker pool.
    burst = api_factory()
    assert burst.settings.quota_queued_jobs >= 300
    user = burst.add_user("bulk")
    accepted = []
    for i in range(300):
        response = burst.upload(
            user, f"note{i:03}.txt", f"Note {i}: part CODE-{i} is fine.".encode()
        )
        assert response.status_code == 202, response.text
        accepted.append(response.json()["job_id"])
    stats = burst.client.get("/stats", headers=user.headers).json()
    assert stats["quotas"]["documents"]["used"] == 300
    for job_id in accepted:
        assert burst.wait_for_job(user, job_id, timeout_s=600)["status"] == "done"
    stats = burst.client.get("/stats", headers=user.headers).json()
    assert stats["documents"] == 300 and stats["chunks"] == 300
    assert stats["quotas"]["queued_jobs"]["used"] == 0
    assert burst.uploads_left() == []
    hits = burst.search(user, "CODE-271")["results"]
    assert hits and hits[0]["source"] == "note271.txt"


def _finish_order_of_burst_and_single_upload(gated: ApiHarness) -> tuple[list[str], str]:
    """Queue 8 uploads of one tenant, then 1 of another, start the workers; the job ids in the
    order they finished, and the single upload's job id."""
    bulk, single = gated.add_user("bulk"), gated.add_user("single")
    bulk_jobs = [
        gated.upload(bulk, f"b{i}.txt", f"Bulk note {i}.".encode()).json()["job_id"]
        for i in range(8)
    ]
    single_job = gated.upload(single, "mine.txt", b"The only note of this tenant.").json()["job_id"]
    gated.container.job_queue.start()
    assert gated.wait_for_job(single, single_job)["status"] == "done"
    for job_id in bulk_jobs:
        assert gated.wait_for_job(bulk, job_id)["status"] == "done"
    ended = {job_id: gated.container.jobs.get(bulk.tenant, job_id) for job_id in bulk_jobs}
    ended[single_job] = gated.container.jobs.get(single.tenant, single_job)
    order = sorted(ended, key=lambda job_id: ended[job_id].updated_at)  # type: ignore[union-attr]
    return order, single_job


def test_a_single_upload_is_not_starved_by_another_tenants_burst(api_factory: ApiFactory) -> None:
    # Workers gated: everything is queued first, then one worker drains the queue, one job at a
    # time (batches: the next test).
    gated = api_factory(start_workers=False, worker_pool_size=1, ingest_batch_jobs=1)
    order, single_job = _finish_order_of_burst_and_single_upload(gated)
    # One worker: the single upload finished right after the first bulk job, not after all eight.
    assert order.index(single_job) == 1, order


def test_with_batches_a_single_upload_waits_for_one_batch_of_another_tenant(
    api_factory: ApiFactory,
) -> None:
    gated = api_factory(start_workers=False, worker_pool_size=1, ingest_batch_jobs=3)
    order, single_job = _finish_order_of_burst_and_single_upload(gated)
    # A batch is one turn: the single upload ran right after the first batch of three.
    assert order.index(single_job) == 3, order
