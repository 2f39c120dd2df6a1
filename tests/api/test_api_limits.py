"""Abuse limits: login and query rate limits, upload size and type, the per-tenant job queue.

The app here runs without workers, so uploads stay queued and nothing else changes under the test.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from app.domain import document_id as new_document_id
from app.services.uploads import ReceivedFile, submit_uploads
from tests.api.harness import ApiFactory, ApiHarness, ApiUser, assert_error_body

pytestmark = pytest.mark.integration

MAX_UPLOAD = 4096
BOUNDARY = "----rag-test-boundary"


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(
        start_workers=False,
        max_upload_bytes=MAX_UPLOAD,
        rate_limit_auth_per_minute=3,
        rate_limit_query_per_minute=5,
        quota_queued_jobs=2,
        max_page_size=20,
    )


def _retry_after(response: Any) -> int:
    value = int(response.headers["retry-after"])
    assert 1 <= value <= 60
    return value


def _multipart(filename: str, payload: Iterator[bytes]) -> Iterator[bytes]:
    yield (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    yield from payload
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


def test_login_rate_limit_is_429_with_retry_after_even_for_the_right_password(
    api: ApiHarness,
) -> None:
    user = api.add_user("limits-login", login=False)
    for _ in range(3):
        response = api.client.post(
            "/auth/token", data={"username": user.username, "password": "wrong password!!"}
        )
        assert_error_body(response, 401, "unauthorized")
    refused = api.client.post(
        "/auth/token", data={"username": user.username, "password": user.password}
    )
    assert_error_body(refused, 429, "rate_limited")
    _retry_after(refused)
    assert "access_token" not in refused.text
    # The client address is limited too: guessing other names from it does not help.
    other = api.client.post(
        "/auth/token", data={"username": "someone-else", "password": "whatever it is"}
    )
    assert_error_body(other, 429, "rate_limited")


def test_query_and_search_share_a_per_user_rate_limit(api: ApiHarness) -> None:
    user = api.add_user("limits-query", login=False)
    neighbour = api.add_user("limits-query", login=False)
    calls = [("/search", "query"), ("/query", "question")] * 3
    statuses = []
    for path, field in calls:
        response = api.client.post(path, json={field: "anything at all"}, headers=user.headers)
        statuses.append(response.status_code)
        if response.status_code == 429:
            assert_error_body(response, 429, "rate_limited")
            _retry_after(response)
    assert statuses == [200] * 5 + [429]
    stream = api.client.post("/query/stream", json={"question": "anything"}, headers=user.headers)
    assert_error_body(stream, 429, "rate_limited")
    # Another user of the same tenant has their own budget.
    assert (
        api.client.post("/search", json={"query": "x"}, headers=neighbour.headers).status_code
        == 200
    )


@pytest.fixture
def uploader(api: ApiHarness) -> ApiUser:
    # A tenant per test: the per-tenant job limit must not carry over between tests.
    return api.add_user(f"limits-up{len(api.users)}", login=False)


def test_a_file_at_the_size_limit_is_accepted(api: ApiHarness, uploader: ApiUser) -> None:
    before = len(api.uploads_left())
    response = api.upload(uploader, "exact.txt", b"a" * MAX_UPLOAD)
    assert response.status_code == 202, response.text
    assert len(api.uploads_left()) == before + 1


@pytest.mark.parametrize("extra", [1, 10 * MAX_UPLOAD, 5 * 1024 * 1024])
def test_an_oversize_file_is_413_and_not_stored(
    api: ApiHarness, uploader: ApiUser, extra: int
) -> None:
    before = api.uploads_left()
    response = api.upload(uploader, "big.txt", b"a" * (MAX_UPLOAD + extra))
    error = assert_error_body(response, 413, "payload_too_large")
    assert str(MAX_UPLOAD) in error["message"]
    assert api.uploads_left() == before


def test_an_oversize_body_without_content_length_is_413(api: ApiHarness, uploader: ApiUser) -> None:
    before = api.uploads_left()
    chunks = (b"b" * 1024 for _ in range(64))
    headers = {**uploader.headers, "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    response = api.client.post(
        "/documents", content=_multipart("stream.txt", chunks), headers=headers
    )
    assert "content-length" not in {k.lower() for k in response.request.headers}
    assert_error_body(response, 413, "payload_too_large")
    assert api.uploads_left() == before


def test_a_declared_content_length_far_over_the_limit_is_refused_up_front(
    api: ApiHarness, uploader: ApiUser
) -> None:
    # The body is small, but the client announces 1 GB: refused before reading anything.
    body = b"".join(_multipart("liar.txt", iter([b"tiny"])))
    headers = {
        **uploader.headers,
        "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
        "Content-Length": str(len(body)),
    }
    small = api.client.post("/documents", content=body, headers=headers)
    assert small.status_code == 202, small.text
    headers["Content-Length"] = str(1024**3)
    # TestClient sends the header as given; the app must trust it only to refuse early.
    big = api.client.post("/documents", content=body, headers=headers)
    assert_error_body(big, 413, "payload_too_large")


@pytest.mark.parametrize(
    "filename",
    ["setup.exe", "photo.gif", "notes", "report.txt.exe", "archive.zip", "old.doc", ".bashrc"],
)
def test_unsupported_types_are_415_and_not_stored(
    api: ApiHarness, uploader: ApiUser, filename: str
) -> None:
    before = api.uploads_left()
    response = api.upload(uploader, filename, b"MZ\x90\x00 some bytes")
    error = assert_error_body(response, 415, "unsupported_file_type")
    assert ".pdf" in error["message"] and ".txt" in error["message"]
    assert api.uploads_left() == before


@pytest.mark.parametrize("filename", ["REPORT.PDF", "../../etc/passwd.txt", "C:\\Users\\a\\b.md"])
def test_supported_types_are_recognised_by_suffix_whatever_the_path(
    api: ApiHarness, uploader: ApiUser, filename: str
) -> None:
    response = api.upload(uploader, filename, b"%PDF-1.4 not really" if "PDF" in filename else b"x")
    assert response.status_code == 202, response.text
    source = response.json()["source"]
    assert "/" not in source and "\\" not in source and ".." not in source.split(".")[0]
    stored = api.uploads_left()
    assert all(path.parent == api.settings.data_dir / "uploads" for path in stored)
    # Generated names (32 hex digits and the suffix), never the client's.
    assert all(re.fullmatch(r"[0-9a-f]{32}\.(pdf|txt|md)", path.name) for path in stored)


def test_per_tenant_job_queue_quota_is_429_with_retry_after(
    api: ApiHarness, uploader: ApiUser
) -> None:
    for i in range(2):
        assert api.upload(uploader, f"doc{i}.txt", b"queued text").status_code == 202
    before = api.uploads_left()
    refused = api.upload(uploader, "doc3.txt", b"one too many")
    error = assert_error_body(refused, 429, "quota_exceeded")
    assert "queued_jobs" in error["message"] and "2" in error["message"]
    _retry_after(refused)
    assert api.uploads_left() == before
    other_tenant = api.add_user("limits-other", login=False)
    assert api.upload(other_tenant, "doc.txt", b"their own budget").status_code == 202


@pytest.mark.parametrize(
    "names",
    [[f"race{i}.txt" for i in range(6)], ["same.txt"] * 3 + ["other.txt"] * 3],
    ids=["distinct-names", "shared-names"],
)
def test_concurrent_uploads_over_the_job_queue_quota_are_refused_without_leftovers(
    api: ApiHarness, uploader: ApiUser, names: list[str]
) -> None:
    before = set(api.uploads_left())
    start = threading.Barrier(len(names))
    responses: list[Any] = [None] * len(names)

    def send(i: int) -> None:
        start.wait(timeout=60)
        responses[i] = api.upload(uploader, names[i], f"racing upload {i}".encode())

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(names))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    statuses = sorted(response.status_code for response in responses)
    assert statuses == [202, 202] + [429] * (len(names) - 2), [r.text for r in responses]
    for response in responses:
        if response.status_code == 429:
            assert "2" in assert_error_body(response, 429, "quota_exceeded")["message"]
            _retry_after(response)
    accepted = [response.json() for response in responses if response.status_code == 202]
    # Only the accepted uploads' files wait for a worker; the refused ones were deleted.
    assert len(set(api.uploads_left()) - before) == 2
    # Each accepted job has its document; no refused upload left one.
    listing = api.client.get("/documents", headers=uploader.headers).json()
    assert {d["document_id"] for d in listing["data"]} == {a["document_id"] for a in accepted}
    for upload in accepted:
        job = api.client.get(f"/jobs/{upload['job_id']}", headers=uploader.headers).json()
        assert (job["status"], job["document_id"]) == ("queued", upload["document_id"])


def test_an_upload_that_lost_the_race_to_create_its_name_is_queued_as_its_new_version(
    api: ApiHarness, uploader: ApiUser
) -> None:
    # Two uploads of a new name at once: the second looked the name up before the first
    # committed, then found the name's id taken (by the first, just committed) and picked the
    # id a document gets when a moved one still holds it. It arrives with that id.
    first = api.upload(uploader, "same.txt", b"first version")
    assert first.status_code == 202, first.text
    stored = api.settings.data_dir / "uploads" / "raced-upload.txt"
    stored.write_bytes(b"second version")

    jobs = submit_uploads(
        api.container.upload_deps,
        tenant_id=uploader.tenant,
        reservations=None,
        files=[ReceivedFile(stored, "same.txt", stored.stat().st_size)],
        known={"same.txt": new_document_id(uploader.tenant, "same.txt\x001")},
    )

    # Queued as the new version of the document the first made, not refused with a 500.
    assert [job.document_id for job in jobs] == [first.json()["document_id"]]
    listing = api.client.get("/documents", headers=uploader.headers).json()
    assert [d["source"] for d in listing["data"]] == ["same.txt"]


def test_a_page_size_cap_below_the_default_page_still_lists(api: ApiHarness) -> None:
    user = api.add_user("limits-pages", login=False)
    for i in range(3):
        assert api.upload(user, f"p{i}.txt", b"page me").status_code in (202, 429)
    listing = api.client.get("/documents", headers=user.headers)
    assert listing.status_code == 200, listing.text
    assert listing.json()["count"] == len(listing.json()["data"]) == 2
    assert api.client.get("/documents?limit=20", headers=user.headers).status_code == 200
    assert_error_body(api.client.get("/documents?limit=21", headers=user.headers), 422)
    one = api.client.get("/documents?limit=1&offset=1", headers=user.headers).json()
    assert one["count"] == 2 and len(one["data"]) == 1
