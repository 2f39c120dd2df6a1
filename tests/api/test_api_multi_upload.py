"""Several files in one POST /documents: one job per file, all accepted or none, each file's
job slot reserved before it is written. A single file keeps its response shape."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from app.api.routes.documents import MAX_FILES_PER_REQUEST
from app.storage.tables import JobRow
from testkit.builders import text_document
from tests.api.harness import ApiFactory, ApiHarness, ApiUser, assert_error_body
from tests.queued_jobs import mark_done

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    # No workers: the tests look at what was queued; quotas small enough to reach.
    return api_factory(start_workers=False, quota_queued_jobs=3, quota_documents=4)


def _post(api: ApiHarness, user: ApiUser, files: list[tuple[str, bytes]]) -> Any:
    return api.client.post(
        "/documents", files=[("file", file) for file in files], headers=user.headers
    )


def _job_rows(api: ApiHarness, tenant: str) -> list[str]:
    with api.container.database.session() as session:
        return list(session.scalars(select(JobRow.status).where(JobRow.tenant_id == tenant)))


def test_a_single_file_keeps_its_response_shape(api: ApiHarness) -> None:
    user = api.add_user("multi-single", login=False)
    body = _post(api, user, [("one.txt", b"just one")]).json()
    first = {key: body[key] for key in ("job_id", "document_id", "status", "source")}
    assert first["status"] == "queued" and first["source"] == "one.txt"
    assert body["jobs"] == [first]


def test_several_files_are_one_job_each(api: ApiHarness) -> None:
    user = api.add_user("multi-three", login=False)
    response = _post(api, user, [("a.txt", b"alpha"), ("b.md", b"# beta"), ("c.txt", b"gamma")])
    assert response.status_code == 202, response.text
    body = response.json()
    assert [job["source"] for job in body["jobs"]] == ["a.txt", "b.md", "c.txt"]
    assert body["job_id"] == body["jobs"][0]["job_id"]
    assert len({job["job_id"] for job in body["jobs"]}) == 3
    for job in body["jobs"]:
        shown = api.client.get(f"/jobs/{job['job_id']}", headers=user.headers).json()
        assert (shown["status"], shown["source"]) == ("queued", job["source"])
    stored = sorted(path.read_bytes() for path in api.uploads_left() if path.stat().st_size < 10)
    assert {b"alpha", b"# beta", b"gamma"} <= set(stored)


def test_several_files_go_together_into_a_collection_with_metadata(api: ApiHarness) -> None:
    admin = api.add_user("multi-placed", login=False)
    made = api.client.post("/collections", json={"name": "tides"}, headers=admin.headers)
    assert made.status_code == 201, made.text
    response = api.client.post(
        "/documents",
        files=[("file", ("high.txt", b"High tide")), ("file", ("low.txt", b"Low tide"))],
        data={"collection": "tides", "metadata": '{"year": 2026}'},
        headers=admin.headers,
    )
    assert response.status_code == 202, response.text
    for job in response.json()["jobs"]:
        shown = api.client.get(f"/documents/{job['document_id']}", headers=admin.headers).json()
        assert (shown["collection"], shown["metadata"]) == ("tides", {"year": 2026})
    # The fields that describe one file are still refused with several.
    several = api.client.post(
        "/documents",
        files=[("file", ("a.txt", b"one")), ("file", ("b.txt", b"two"))],
        data={"sync_root": "laptop"},
        headers=admin.headers,
    )
    assert_error_body(several, 422, "invalid_input")


@pytest.mark.parametrize(
    ("files", "status", "code"),
    [
        ([("a.txt", b"ok"), ("b.exe", b"MZ"), ("c.txt", b"ok")], 415, "unsupported_file_type"),
        ([(f"q{i}.txt", b"queue me") for i in range(4)], 429, "quota_exceeded"),
        # Two files for one document: which version it kept depended on which job ran last.
        ([("tide.txt", b"version one"), ("tide.txt", b"version two")], 422, "invalid_input"),
        ([("a:b.txt", b"one"), ("c.txt", b"ok"), ("a_b.txt", b"two")], 422, "invalid_input"),
    ],
    ids=["bad-type", "queue-quota", "one-name-twice", "one-name-once-made-safe"],
)
def test_a_request_with_one_refused_file_stores_none_of_them(
    api: ApiHarness, files: list[tuple[str, bytes]], status: int, code: str
) -> None:
    user = api.add_user(f"multi-refused-{status}-{len(files)}", login=False)
    before = api.uploads_left()
    assert_error_body(_post(api, user, files), status, code)
    assert api.uploads_left() == before
    assert _job_rows(api, user.tenant) == []  # every reservation was given back
    assert api.client.get("/documents", headers=user.headers).json()["count"] == 0


def test_several_files_over_the_document_quota_are_refused_together(api: ApiHarness) -> None:
    user = api.add_user("multi-docs", login=False)
    assert _post(api, user, [(f"a{i}.txt", b"x") for i in range(3)]).status_code == 202
    with api.container.database.session() as session:
        ids = list(session.scalars(select(JobRow.job_id).where(JobRow.tenant_id == user.tenant)))
    for job_id in ids:  # as if a worker finished them: the queue has room again
        mark_done(api.container.jobs, job_id, 1, 1)
    before = api.uploads_left()
    error = assert_error_body(
        _post(api, user, [("b1.txt", b"y"), ("b2.txt", b"z")]), 413, "quota_exceeded"
    )
    assert "documents" in error["message"]
    assert api.uploads_left() == before
    assert api.client.get("/documents", headers=user.headers).json()["count"] == 3


def test_more_files_than_a_request_may_carry_is_422(api_factory: ApiFactory) -> None:
    roomy = api_factory(start_workers=False)
    user = roomy.add_user("multi-many", login=False)
    files = [(f"n{i}.txt", b"n") for i in range(MAX_FILES_PER_REQUEST + 1)]
    error = assert_error_body(_post(roomy, user, files), 422, "validation_error")
    assert str(MAX_FILES_PER_REQUEST) in error["message"]
    assert roomy.uploads_left() == []
    assert _job_rows(roomy, user.tenant) == []


def test_every_file_of_a_request_is_indexed(api_factory: ApiFactory) -> None:
    live = api_factory()
    user = live.add_user("multi-live")
    files = [(f"part{i}.txt", text_document(f"Part KESTREL-{i} fits pump {i}.")) for i in range(3)]
    response = _post(live, user, files)
    assert response.status_code == 202, response.text
    for job in response.json()["jobs"]:
        assert live.wait_for_job(user, job["job_id"])["status"] == "done"
    hits = live.search(user, "KESTREL-2")["results"]
    assert hits and hits[0]["source"] == "part2.txt"
