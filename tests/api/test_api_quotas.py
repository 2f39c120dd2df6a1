"""Per-tenant quotas through the HTTP app: shown by /stats, refused with `quota_exceeded` before
anything is stored, and the job slot taken before the upload body is read.

The app runs without workers unless a test says otherwise, so uploads stay queued.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from sqlalchemy import select

from app.storage.tables import JobRow
from testkit.builders import text_document
from tests.api.harness import ApiFactory, ApiHarness, ApiUser, assert_error_body
from tests.queued_jobs import mark_done

pytestmark = pytest.mark.integration

MAX_UPLOAD = 4096


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(
        start_workers=False,
        max_upload_bytes=MAX_UPLOAD,
        quota_documents=3,
        quota_stored_bytes=1000,
        quota_queued_jobs=2,
    )


def _quotas(api: ApiHarness, user: ApiUser) -> dict[str, dict[str, int]]:
    response = api.client.get("/stats", headers=user.headers)
    assert response.status_code == 200, response.text
    quotas: dict[str, dict[str, int]] = response.json()["quotas"]
    return quotas


def _job_rows(api: ApiHarness, tenant: str) -> list[tuple[str, str]]:
    with api.container.database.session() as session:
        rows = session.execute(
            select(JobRow.job_id, JobRow.status).where(JobRow.tenant_id == tenant)
        ).all()
    return [(str(job_id), str(status)) for job_id, status in rows]


def _drain(api: ApiHarness, tenant: str) -> None:
    """Mark the tenant's queued jobs done, as a worker would, so the queue quota frees up."""
    for job_id, status in _job_rows(api, tenant):
        if status == "queued":
            mark_done(api.container.jobs, job_id, chunks_indexed=0, pages=0)


def test_stats_show_each_quota_with_its_usage(api: ApiHarness) -> None:
    user = api.add_user("quota-stats", login=False)
    before = _quotas(api, user)
    settings = api.settings
    assert before == {
        "documents": {"used": 0, "limit": 3},
        "stored_bytes": {"used": 0, "limit": 1000},
        "chunks": {"used": 0, "limit": settings.quota_chunks},
        # tests/api/test_api_ocr.py: its usage
        "ocr_pages": {"used": 0, "limit": settings.quota_ocr_pages},
        "queued_jobs": {"used": 0, "limit": 2},
        # tests/api/test_api_conversation_quotas.py: their usage
        "conversations": {"used": 0, "limit": settings.quota_conversations_per_user},
        "conversation_messages": {"used": 0, "limit": settings.quota_conversation_messages},
        "conversation_bytes": {"used": 0, "limit": settings.quota_conversation_bytes},
    }
    assert api.upload(user, "a.txt", b"x" * 100).status_code == 202
    after = _quotas(api, user)
    assert after["documents"]["used"] == 1
    assert after["stored_bytes"]["used"] == 100
    assert after["queued_jobs"]["used"] == 1


def test_over_the_document_quota_is_413_and_nothing_is_stored(api: ApiHarness) -> None:
    user = api.add_user("quota-docs", login=False)
    for i in range(3):
        assert api.upload(user, f"d{i}.txt", b"small text").status_code == 202
        _drain(api, user.tenant)
    files_before = api.uploads_left()
    refused = api.upload(user, "d3.txt", b"one document too many")
    error = assert_error_body(refused, 413, "quota_exceeded")
    assert "documents" in error["message"] and "3" in error["message"]
    assert api.uploads_left() == files_before
    assert _quotas(api, user)["documents"]["used"] == 3
    assert len(_job_rows(api, user.tenant)) == 3  # no job, no reservation left behind
    # Replacing an existing document is not a new document: still accepted.
    assert api.upload(user, "d1.txt", b"new version").status_code == 202


def test_over_the_stored_bytes_quota_is_413_and_names_the_quota(api: ApiHarness) -> None:
    user = api.add_user("quota-bytes", login=False)
    assert api.upload(user, "big.txt", b"y" * 900).status_code == 202
    _drain(api, user.tenant)
    files_before = api.uploads_left()
    refused = api.upload(user, "more.txt", b"z" * 200)
    error = assert_error_body(refused, 413, "quota_exceeded")
    assert "stored_bytes" in error["message"]
    assert api.uploads_left() == files_before
    listing = api.client.get("/documents", headers=user.headers).json()
    assert [d["source"] for d in listing["data"]] == ["big.txt"]
    # A replacement is measured without the version it replaces.
    assert api.upload(user, "big.txt", b"w" * 950).status_code == 202


def test_a_full_queue_is_refused_before_the_body_is_read(api: ApiHarness) -> None:
    user = api.add_user("quota-queue", login=False)
    for i in range(2):
        assert api.upload(user, f"q{i}.txt", b"queued").status_code == 202
    files_before = api.uploads_left()
    # Far over the upload size: had the body been read first, this would be a 413.
    refused = api.upload(user, "huge.txt", b"h" * (MAX_UPLOAD * 4))
    error = assert_error_body(refused, 429, "quota_exceeded")
    assert "queued_jobs" in error["message"]
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert api.uploads_left() == files_before
    assert sorted(status for _, status in _job_rows(api, user.tenant)) == ["queued", "queued"]
    # Another tenant's queue is its own.
    other = api.add_user("quota-queue-other", login=False)
    assert api.upload(other, "q.txt", b"mine").status_code == 202


def test_a_small_upload_to_a_full_queue_is_refused_keeps_nothing_and_is_audited(
    api: ApiHarness,
) -> None:
    # A small request is read before it takes its slot: the same 429, and nothing stays on disk.
    user = api.add_user("quota-queue-small", login=False)  # the first user: admin
    assert api.upload(user, "q0.txt", b"queued").status_code == 202
    files_before = api.uploads_left()
    two = api.client.post(
        "/documents",
        files=[
            ("file", ("a.txt", b"first", "text/plain")),
            ("file", ("b.txt", b"b", "text/plain")),
        ],
        headers=user.headers,
    )
    error = assert_error_body(two, 429, "quota_exceeded")  # one slot left: neither is queued
    assert "queued_jobs" in error["message"]
    assert api.uploads_left() == files_before
    assert [status for _, status in _job_rows(api, user.tenant)] == ["queued"]
    assert api.upload(user, "q1.txt", b"the last slot").status_code == 202
    waiting = api.uploads_left()  # q1's file has joined those waiting for their jobs
    refused = api.upload(user, "q2.txt", b"one too many")
    assert_error_body(refused, 429, "quota_exceeded")
    assert api.uploads_left() == waiting and len(waiting) == len(files_before) + 1
    audit = api.client.get("/audit", params={"action": "quota.refused"}, headers=user.headers)
    assert [e["detail"]["quota"] for e in audit.json()["data"]] == ["queued_jobs"] * 2
    _drain(api, user.tenant)
    assert api.upload(user, "q2.txt", b"room again").status_code == 202


@pytest.mark.parametrize(
    ("filename", "content", "status"),
    [
        ("too-big.txt", b"b" * (MAX_UPLOAD + 1), 413),
        ("program.exe", b"MZ binary", 415),
    ],
)
def test_a_failed_upload_gives_its_job_slot_back(
    api: ApiHarness, filename: str, content: bytes, status: int
) -> None:
    user = api.add_user(f"quota-release-{status}", login=False)
    for _ in range(3):  # more failures than the queue has slots
        assert api.upload(user, filename, content).status_code == status
    assert _job_rows(api, user.tenant) == []
    assert _quotas(api, user)["queued_jobs"]["used"] == 0
    for i in range(2):
        assert api.upload(user, f"ok{i}.txt", b"fits").status_code == 202


def test_a_malformed_body_gives_its_job_slot_back(api: ApiHarness) -> None:
    user = api.add_user("quota-malformed", login=False)
    response = api.client.post(
        "/documents",
        content=b'--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\n'
        b"truncated",
        headers={**user.headers, "Content-Type": "multipart/form-data; boundary=xyz"},
    )
    assert_error_body(response, 422, "validation_error")
    assert _job_rows(api, user.tenant) == []


def test_a_client_that_disconnects_mid_upload_gives_its_job_slot_back(api: ApiHarness) -> None:
    user = api.add_user("quota-disconnect", login=False)
    boundary = "cut"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="cut.txt"\r\n\r\n'
    ).encode()
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": head + b"partial data", "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [
        (b"authorization", user.headers["Authorization"].encode()),
        (b"content-type", f"multipart/form-data; boundary={boundary}".encode()),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/documents",
        "raw_path": b"/documents",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50001),
        "server": ("testserver", 80),
        "state": {},
    }
    files_before = api.uploads_left()
    # How the app ends a request whose client has left is not the point; what it leaves is.
    with contextlib.suppress(Exception):
        asyncio.run(api.app(scope, receive, send))
    assert _job_rows(api, user.tenant) == []
    assert api.uploads_left() == files_before


def test_a_document_over_the_chunk_quota_fails_its_job_and_stores_nothing(
    api_factory: ApiFactory,
) -> None:
    api = api_factory(quota_chunks=3, chunk_size=200, chunk_overlap=20)
    user = api.add_user("quota-chunks")
    small = api.upload_and_wait(user, "small.txt", text_document("Pump P-1 is blue."))
    assert small["status"] == "done" and small["chunks_indexed"] == 1
    paragraphs = [
        f"Paragraph {i} describes valve V-{i} in enough words to fill a chunk. " * 3
        for i in range(8)
    ]
    big = api.upload_and_wait(user, "big.txt", text_document(*paragraphs))
    assert big["status"] == "failed"
    assert "quota exceeded: chunks" in big["error"]
    stats = api.client.get("/stats", headers=user.headers).json()
    assert stats["chunks"] == 1  # only the small document's chunk is indexed
    assert stats["quotas"]["chunks"] == {"used": 1, "limit": 3}
    assert {hit["source"] for hit in api.search(user, "valve V-3 paragraph")["results"]} <= {
        "small.txt"
    }


def test_the_keyword_index_keeps_a_bounded_number_of_snapshots(api_factory: ApiFactory) -> None:
    api = api_factory(keyword_snapshots_kept=2)
    user = api.add_user("quota-snapshots")
    for i in range(4):  # each upload changes the index: a new snapshot on disk
        job = api.upload_and_wait(user, f"s{i}.txt", text_document(f"Snapshot note {i}."))
        assert job["status"] == "done"
        # Found at once (the search brings the index up to date if the job's refresh has not).
        hits = api.search(user, f"Snapshot note {i}")["results"]
        assert hits[0]["source"] == f"s{i}.txt"
    keyword_dir = api.settings.data_dir / "keyword"
    (tenant_dir,) = [p for p in keyword_dir.iterdir() if p.is_dir()]
    snapshots = [p for p in tenant_dir.iterdir() if p.is_dir()]
    assert len(snapshots) == 2
    assert api.container.retriever.keyword_index.rebuilds[user.tenant] >= 4
