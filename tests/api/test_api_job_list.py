"""`GET /jobs`: a tenant's ingestion jobs, newest first, filtered by status and paged, so a
client syncing a folder polls one listing instead of every job. Another tenant's jobs and
uploads still being received never appear.

Real stack (Chroma in a temp dir, the shipped `use` embedder); workers are not started, so the
test decides when the queued jobs run.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.job_runners.runner import run_jobs
from testkit.builders import corrupt_pdf, text_document
from tests.api.harness import ApiFactory, ApiHarness, ApiUser, assert_error_body

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(start_workers=False)


def listed(api: ApiHarness, user: ApiUser, query: str = "") -> Any:
    response = api.client.get(f"/jobs{query}", headers=user.headers)
    assert response.status_code == 200, response.text
    return response.json()


def upload(api: ApiHarness, user: ApiUser, name: str, content: bytes) -> str:
    response = api.upload(user, name, content)
    assert response.status_code == 202, response.text
    return str(response.json()["job_id"])


def test_a_tenant_lists_its_own_jobs_by_status_newest_first(api: ApiHarness) -> None:
    owner, other = api.add_user("jobs-owner"), api.add_user("jobs-other")
    ids = [
        upload(api, owner, f"note{i}.txt", text_document(f"Valve {i} is checked at dawn."))
        for i in range(3)
    ]
    ids.append(upload(api, owner, "broken.pdf", corrupt_pdf()))
    theirs = upload(api, other, "theirs.txt", text_document("Another tenant's notes."))
    # An upload still being received holds a reservation: not a job a client can see yet.
    api.container.jobs.reserve("jobs-owner", 100)

    everything = listed(api, owner)
    assert everything["count"] == 4
    assert [job["job_id"] for job in everything["data"]] == ids[::-1]
    assert {job["status"] for job in everything["data"]} == {"queued"}
    assert listed(api, other)["count"] == 1
    assert theirs not in {job["job_id"] for job in everything["data"]}

    page = listed(api, owner, "?limit=2&offset=1")
    assert page["count"] == 4 and [job["job_id"] for job in page["data"]] == ids[2:0:-1]

    batch = api.container.jobs.claim_batch(max_jobs=100)
    assert {job.job_id for job in batch} == set(ids)
    assert run_jobs(api.container.ingest_deps, batch) == []
    assert listed(api, owner, "?status=queued&status=processing") == {"data": [], "count": 0}
    done = listed(api, owner, "?status=done")
    assert done["count"] == 3
    assert all(job["chunks_indexed"] >= 1 for job in done["data"])
    (failed,) = listed(api, owner, "?status=failed")["data"]
    assert failed["job_id"] == ids[-1] and failed["error_code"]
    assert listed(api, other, "?status=queued")["count"] == 1  # not run: another tenant's


@pytest.mark.parametrize(
    "query",
    ["?status=reserved", "?status=finished", "?limit=0", "?offset=-1", "?limit=many"],
)
def test_bad_listing_parameters_get_a_422_error_body(api: ApiHarness, query: str) -> None:
    user = api.add_user("jobs-bad-input")
    response = api.client.get(f"/jobs{query}", headers=user.headers)
    assert_error_body(response, 422)


def test_an_uploader_still_sees_the_job_of_a_document_deleted_since(api: ApiHarness) -> None:
    admin = api.add_user("jobs-deleted", role="admin")
    uploader = api.add_user("jobs-deleted", role="member")
    colleague = api.add_user("jobs-deleted", role="member")
    # A collection the members do not read: their job listing is then filtered by collection.
    hidden = {"name": "board", "visibility": "restricted"}
    assert api.client.post("/collections", json=hidden, headers=admin.headers).status_code == 201
    job_id = upload(api, uploader, "wrong-file.txt", text_document("Uploaded by mistake."))
    document_id = api.client.get(f"/jobs/{job_id}", headers=uploader.headers).json()["document_id"]
    deleted = api.client.delete(f"/documents/{document_id}", headers=uploader.headers)
    assert deleted.status_code in (200, 202, 204), deleted.text

    # The uploader (a `rag upload --wait` for example) learns how the job ended, by id and in
    # the listing, instead of a 404 as if it had never uploaded anything.
    seen = api.client.get(f"/jobs/{job_id}", headers=uploader.headers)
    assert seen.status_code == 200, seen.text
    assert seen.json()["source"] == "wrong-file.txt"
    assert [job["job_id"] for job in listed(api, uploader)["data"]] == [job_id]
    # A colleague who did not upload it sees nothing of a document that no longer exists.
    assert_error_body(api.client.get(f"/jobs/{job_id}", headers=colleague.headers), 404)
    assert listed(api, colleague)["count"] == 0
    assert [job["job_id"] for job in listed(api, admin)["data"]] == [job_id]
