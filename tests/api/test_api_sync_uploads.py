"""The upload fields a folder sync sends (source_path, sync_root, sha256) and the listing it
compares with: names by path, unchanged content answered 200 with no job, bad fields 422."""

from __future__ import annotations

import hashlib
import unicodedata

import httpx
import pytest

from tests.api.harness import ApiHarness, ApiUser, assert_error_body

pytestmark = pytest.mark.integration


def sha(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def send(api: ApiHarness, user: ApiUser, content: bytes, **fields: str) -> httpx.Response:
    return api.client.post(
        "/documents",
        files={"file": ("whatever.txt", content)},
        data=fields,
        headers=user.headers,
    )


@pytest.fixture(scope="module")
def user(api: ApiHarness) -> ApiUser:
    return api.add_user("sync-fields")


def test_unchanged_content_is_answered_without_a_job_and_changed_content_replaces(
    api: ApiHarness, user: ApiUser
) -> None:
    first = b"The ferry leaves at 07:10 from pier 3."
    fields = {"source_path": "timetables/ferry.txt", "sync_root": "harbour"}
    queued = send(api, user, first, sha256=sha(first), **fields)
    assert queued.status_code == 202, queued.text
    job = api.wait_for_job(user, queued.json()["job_id"])
    assert job["status"] == "done" and job["source"] == "timetables/ferry.txt"
    jobs_before = api.client.get("/jobs", headers=user.headers).json()["count"]
    # The first job's upload is removed just after it is recorded done: it may still be there.
    files_before = set(api.uploads_left())

    again = send(api, user, first, sha256=sha(first), **fields)
    assert again.status_code == 200
    assert again.json() == {
        "status": "unchanged",
        "document_id": job["document_id"],
        "source": "timetables/ferry.txt",
    }
    assert api.client.get("/jobs", headers=user.headers).json()["count"] == jobs_before
    assert set(api.uploads_left()) <= files_before  # the unchanged upload left no file

    changed = b"The ferry leaves at 07:40 from pier 3."
    replaced = send(api, user, changed, sha256=sha(changed), **fields)
    assert replaced.status_code == 202
    assert replaced.json()["document_id"] == job["document_id"]
    api.wait_for_job(user, replaced.json()["job_id"])

    listing = api.client.get(
        "/documents",
        params={"sync_root": "harbour", "fields": ["source", "content_sha256"]},
        headers=user.headers,
    ).json()
    assert listing == {
        "data": [{"source": "timetables/ferry.txt", "content_sha256": sha(changed)}],
        "count": 1,
    }
    by_prefix = api.client.get(
        "/documents", params={"source_prefix": "timetables/"}, headers=user.headers
    ).json()
    assert [d["sync_root"] for d in by_prefix["data"]] == ["harbour"]
    nothing = api.client.get(
        "/documents", params={"sync_root": "no-such-folder"}, headers=user.headers
    ).json()
    assert nothing == {"data": [], "count": 0}  # a filter that matches nothing returns nothing


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"sha256": "abc"}, "sha256"),
        ({"sha256": "0" * 64}, "not the"),  # a hash the bytes do not have
        ({"source_path": "../etc/passwd.txt"}, "relative path"),
        ({"source_path": "/abs/file.txt"}, "relative path"),
        ({"source_path": "a//b.txt"}, "relative path"),
        ({"sync_root": "x" * 101}, "sync_root"),
        ({"source_path": "d/" + "x" * 260 + ".txt"}, "longer"),
        # The name keeps the file's type: a .txt named .pdf would be "a PDF" without pages, and
        # a PDF named .txt one whose pages never show and that a content_type filter misses.
        ({"source_path": "charts/buoy.pdf"}, "keeps its file's type"),
        ({"source_path": "charts/buoy"}, "keeps its file's type"),
    ],
)
def test_bad_sync_fields_are_refused_and_nothing_is_kept(
    api: ApiHarness, user: ApiUser, fields: dict[str, str], message: str
) -> None:
    response = send(api, user, b"Buoy 7 is red.", **fields)
    error = assert_error_body(response, 422)
    assert message in error["message"]
    assert api.uploads_left() == []
    assert (
        api.client.get("/jobs", headers=user.headers, params={"status": "queued"}).json()["count"]
        == 0
    )


def test_a_source_path_may_spell_its_file_s_type_in_capitals(
    api: ApiHarness, user: ApiUser
) -> None:
    response = send(api, user, b"Buoy 9 is green.", source_path="charts/BUOY-9.TXT")
    assert response.status_code == 202, response.text
    assert api.wait_for_job(user, response.json()["job_id"])["status"] == "done"


def test_sync_fields_describe_one_file(api: ApiHarness, user: ApiUser) -> None:
    response = api.client.post(
        "/documents",
        files=[("file", ("a.txt", b"one")), ("file", ("b.txt", b"two"))],
        data={"sha256": sha(b"one")},
        headers=user.headers,
    )
    assert_error_body(response, 422)
    assert api.uploads_left() == []


def test_unknown_listing_fields_are_refused(api: ApiHarness, user: ApiUser) -> None:
    response = api.client.get("/documents", params={"fields": "text"}, headers=user.headers)
    assert_error_body(response, 422, "validation_error")


def test_a_name_prefix_matches_however_its_accents_are_composed(
    api: ApiHarness, user: ApiUser
) -> None:
    # macOS spells file names decomposed (e + combining accent); names are stored composed.
    decomposed = unicodedata.normalize("NFD", "café-menu.txt")
    response = api.client.post(
        "/documents", files={"file": (decomposed, b"Soup of the day.")}, headers=user.headers
    )
    assert response.status_code == 202, response.text
    assert response.json()["source"] == unicodedata.normalize("NFC", "café-menu.txt")
    for form in ("NFC", "NFD"):
        prefix = unicodedata.normalize(form, "café")
        listing = api.client.get(
            "/documents", params={"source_prefix": prefix}, headers=user.headers
        ).json()
        assert [d["source"] for d in listing["data"]] == [response.json()["source"]], form
