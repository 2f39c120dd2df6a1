"""Webhooks when jobs run on Redis: webhook events go out from the rq worker process (API
processes run no jobs). An ingestion job the worker ran fires the signed `document.indexed`, and
a delete made through the API is delivered from the database even once the API process that
recorded it has stopped. A real local receiver verifies each signature."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.local_stack import ApiClient, LocalStack
from tests.api.webhook_receiver import Receiver
from tests.scaleout.running_stack import running_stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    """One API process and one rq worker over Chroma, PostgreSQL and Redis."""
    settings = {
        "RAG_ENV": "development",  # an http receiver (production requires https)
        "RAG_WEBHOOK_ALLOW_PRIVATE": "true",  # the receiver listens on 127.0.0.1
    }
    with running_stack(tmp_path, settings, apis=1, workers=1) as (local, _apis):
        yield local


def test_the_rq_worker_sends_the_signed_events_of_its_jobs_and_of_the_api(
    stack: LocalStack, receiver: Receiver
) -> None:
    (api,) = (p for p in stack.processes if p.name == "api1")
    stack.create_user("harbour", "harbour-admin")  # the tenant's first user: an admin
    client = ApiClient(api.url)
    client.login("harbour-admin")
    made = client.post(
        "/webhooks",
        {"url": receiver.url, "events": ["document.indexed", "document.deleted"]},
    )
    assert made.status_code == 201, made.text
    receiver.secret = made.json()["secret"]

    job = client.upload("pier.txt", b"The pier lights are switched on at dusk.")
    stack.job_ids.add(job["job_id"])
    assert client.wait_job(job["job_id"], timeout_s=240)["status"] == "done"
    (indexed,) = receiver.wait_for("document.indexed")
    assert indexed.signed  # HMAC over id.timestamp.body with the secret given once
    assert indexed.body["data"]["document_id"] == job["document_id"]
    assert indexed.body["data"]["source"] == "pier.txt"
    assert indexed.body["data"]["status"] == "done"
    assert indexed.body["data"]["collection"] == {"id": "general", "name": "general"}
    assert "dusk" not in str(indexed.body)  # ids and names, never the text

    assert client.delete(f"/documents/{job['document_id']}").status_code == 204
    stack.stop(api)  # the API process is gone: only the worker can deliver what it recorded
    (deleted,) = receiver.wait_for("document.deleted")
    assert deleted.signed and deleted.body["data"]["document_id"] == job["document_id"]
    assert deleted.headers["webhook-id"] != indexed.headers["webhook-id"]
    assert len(receiver.requests) == 2  # each event once, at the first attempt
    client.close()
