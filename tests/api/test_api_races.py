"""Races between a running ingestion job and the client: a delete must win."""

from __future__ import annotations

import time

import pytest
from api_builders import text_document
from conftest import ApiFactory, ApiHarness

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    # Small chunks in small batches: the job reports progress often and takes a while.
    return api_factory(chunk_size=300, chunk_overlap=30, embedding_batch_size=8, worker_pool_size=1)


def test_a_document_deleted_while_it_is_indexed_stays_deleted(api: ApiHarness) -> None:
    user = api.add_user("race-delete")
    paragraphs = [
        f"Clause {i}: the ORCHIDVAULT tenant agreement sets rent review {i} at "
        f"{(i * 37) % 90 + 10} percent, payable on day {i % 28 + 1} of each quarter."
        for i in range(200)
    ]
    accepted = api.upload(user, "lease.txt", text_document(*paragraphs)).json()
    deadline = time.monotonic() + 180
    while True:
        job = api.client.get(f"/jobs/{accepted['job_id']}", headers=user.headers).json()
        if job["status"] == "processing" and job["progress"]["stage"] == "embedding":
            break
        assert job["status"] in ("queued", "processing"), job
        assert time.monotonic() < deadline
        time.sleep(0.01)
    deleted = api.client.delete(f"/documents/{accepted['document_id']}", headers=user.headers)
    assert deleted.status_code == 204

    final = api.wait_for_job(user, accepted["job_id"])
    assert final["status"] == "failed", final
    assert "deleted while it was being indexed" in final["error"]
    doc = api.client.get(f"/documents/{accepted['document_id']}", headers=user.headers)
    assert doc.status_code == 404
    assert api.client.get("/documents", headers=user.headers).json()["count"] == 0
    assert api.search(user, "ORCHIDVAULT rent review")["results"] == []
    assert api.query(user, "What is the ORCHIDVAULT rent review?")["refused"] is True
    assert api.client.get("/stats", headers=user.headers).json()["chunks"] == 0
    assert api.uploads_left() == []
