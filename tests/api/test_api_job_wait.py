"""`GET /jobs/{id}?wait=S`: a client that uploads a file and waits for it is answered as soon as
the job ends, not after its next poll; without an end it gets the job's state after S seconds.
Bad `wait` values are a 422 with the shared error body, and another tenant's job is a 404 at
once. Waiting clients hold no thread: requests of everyone else still run.

Real stack (Chroma in a temp dir, the shipped `use` embedder); workers are not started, so the
test decides when a job runs, and when it ends in "another process" (a second job store on the
same database, whose ends ring no doorbell in the app).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from app.job_runners.runner import run_jobs
from app.jobs.store import JobStore
from testkit.builders import text_document
from tests.api.harness import ApiFactory, ApiHarness, ApiUser, assert_error_body
from tests.queued_jobs import jobs_watched

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(start_workers=False)


def upload(api: ApiHarness, user: ApiUser, name: str) -> str:
    response = api.upload(user, name, text_document(f"{name}: the pump is checked at dawn."))
    assert response.status_code == 202, response.text
    return str(response.json()["job_id"])


def waited(api: ApiHarness, user: ApiUser, job_id: str, wait: float) -> tuple[Any, float]:
    """The job's body after GET ?wait=, and the seconds the answer took."""
    started = time.monotonic()
    response = api.client.get(f"/jobs/{job_id}?wait={wait}", headers=user.headers)
    assert response.status_code == 200, response.text
    return response.json(), time.monotonic() - started


def later(seconds: float, action: Any) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(seconds), action()))
    thread.start()
    return thread


def test_a_waiting_client_is_answered_when_its_job_ends(api: ApiHarness) -> None:
    user = api.add_user("wait-done")
    job_id = upload(api, user, "pump.txt")
    ingest = api.container.ingest_deps

    def run() -> None:
        claimed = api.container.jobs.claim(job_id)
        assert claimed is not None and run_jobs(ingest, [claimed]) == []

    worker = later(0.5, run)
    job, took = waited(api, user, job_id, 30)
    worker.join()
    assert job["status"] == "done" and job["chunks_indexed"] >= 1
    assert took < 20, took  # answered at the end, long before the 30 s it would wait
    # An ended job is answered at once, whatever the wait.
    assert waited(api, user, job_id, 30)[0]["status"] == "done"


def test_without_an_end_the_wait_answers_with_the_current_state(api: ApiHarness) -> None:
    user = api.add_user("wait-timeout")
    job_id = upload(api, user, "idle.txt")
    job, took = waited(api, user, job_id, 0.6)
    assert job["status"] == "queued" and job["job_id"] == job_id
    assert took >= 0.6
    # No wait (the default) is the plain read.
    response = api.client.get(f"/jobs/{job_id}", headers=user.headers)
    assert response.status_code == 200 and response.json()["status"] == "queued"


def test_a_job_ended_by_another_process_is_seen_without_a_doorbell(api: ApiHarness) -> None:
    user = api.add_user("wait-elsewhere")
    job_id = upload(api, user, "elsewhere.txt")
    elsewhere = JobStore(api.container.database)  # another process's view of the same table

    def fail_it() -> None:
        assert elsewhere.claim(job_id) is not None
        elsewhere.mark_failed(job_id, "no such parser", "ingestion_failed")

    worker = later(0.3, fail_it)
    job, took = waited(api, user, job_id, 20)
    worker.join()
    assert job["status"] == "failed" and job["error_code"] == "ingestion_failed"
    assert took < 15, took


def test_another_tenants_job_is_not_found_at_once(api: ApiHarness) -> None:
    owner, stranger = api.add_user("wait-owner"), api.add_user("wait-stranger")
    job_id = upload(api, owner, "private.txt")
    started = time.monotonic()
    response = api.client.get(f"/jobs/{job_id}?wait=20", headers=stranger.headers)
    assert_error_body(response, 404)
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("wait", ["-1", "31", "soon", "nan", "inf", ""])
def test_a_bad_wait_gets_a_422_error_body(api: ApiHarness, wait: str) -> None:
    user = api.add_user("wait-bad")
    job_id = upload(api, user, f"bad{abs(hash(wait))}.txt")
    response = api.client.get(f"/jobs/{job_id}?wait={wait}", headers=user.headers)
    assert_error_body(response, 422)


def test_waiting_clients_hold_no_thread_of_the_shared_pool(api: ApiHarness) -> None:
    # More waiters than the thread pool has threads (40): were each to hold one, the listing
    # below would queue behind them until they time out.
    user = api.add_user("wait-many")
    job_id = upload(api, user, "many.txt")
    with ThreadPoolExecutor(60) as pool:
        waiters = [pool.submit(waited, api, user, job_id, 4) for _ in range(60)]
        time.sleep(1.0)
        started = time.monotonic()
        listing = api.client.get("/jobs?status=queued", headers=user.headers)
        answered_in = time.monotonic() - started
        assert listing.status_code == 200 and listing.json()["count"] >= 1
        assert all(w.result()[0]["status"] == "queued" for w in waiters)
    assert answered_in < 2.5, answered_in  # the waiters were still waiting until ~4 s
    assert jobs_watched(api.container.jobs.endings) == 0  # every waiter left its watch
