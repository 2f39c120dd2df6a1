"""Collections, groups, grants, a document's metadata and search filters in the web app, in
Chromium against a live server, driven by visible labels and roles: an admin creates, renames
and deletes collections (the 409 of one that holds documents explained, its documents deleted
only when asked), makes a group and gives it access; a member who manages one collection gives
access to it and is refused a change the server forbids; a reader sees what they read and no
control to change it; filters reach /search and /query and narrow what is found."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from browser import A11Y_AUDIT, screenshot
from playwright.sync_api import expect

from testkit.builders import text_document
from testkit.live_server import LiveServer
from tests.api.browser import sign_in_with_form

pytestmark = pytest.mark.integration

TENANT = "web-access"
PASSWORD = "web access password"
# ada is the tenant's first user, so its admin.
USERS = {"ada": "admin", "max": "member", "rex": "reader"}
JOB_TIMEOUT_S = 180
DOCUMENTS = {
    # name: (text, collection, metadata, uploader)
    "pump.txt": (
        "The AUK pump is serviced every nine days by the plant crew.",
        "general",
        {"department": "engineering", "year": 2023},
        "ada",
    ),
    "leave.txt": (
        "Annual leave for the plant crew is requested nine days ahead.",
        "general",
        {"department": "hr", "year": 2024},
        "ada",
    ),
    "roadmap.txt": (
        "The projects roadmap names the plant crew's next pump.",
        "projects",
        {"department": "engineering", "year": 2025},
        "ada",
    ),
}


def _token(live: LiveServer, username: str) -> str:
    response = httpx.post(
        f"{live.url}/auth/token", data={"username": username, "password": PASSWORD}
    )
    assert response.status_code == 200, response.text
    token: str = response.json()["access_token"]
    return token


def _headers(live: LiveServer, username: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {_token(live, username)}"}


def _wait_for_jobs(live: LiveServer, headers: dict[str, str], job_ids: list[str]) -> None:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    for job_id in job_ids:
        while True:
            job = httpx.get(f"{live.url}/jobs/{job_id}", headers=headers).json()
            if job["status"] in ("done", "failed"):
                assert job["status"] == "done", job
                break
            assert time.monotonic() < deadline, job
            time.sleep(0.3)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(
        tmp_path_factory.mktemp("web-access") / "data",
        {"RAG_RATE_LIMIT_AUTH_PER_MINUTE": "1000"},
    )
    for username, role in USERS.items():
        server.create_user(TENANT, username, PASSWORD, role=role)
    with server.running():
        admin = _headers(server, "ada")
        max_id = httpx.get(f"{server.url}/auth/me", headers=_headers(server, "max")).json()[
            "user_id"
        ]
        # "projects": restricted, managed by max (a member) through a grant of his own.
        made = httpx.post(
            f"{server.url}/collections",
            json={"name": "projects", "visibility": "restricted"},
            headers=admin,
        )
        assert made.status_code == 201, made.text
        granted = httpx.put(
            f"{server.url}/collections/projects/access",
            json={"grants": [{"user_id": max_id, "permission": "manage"}]},
            headers=admin,
        )
        assert granted.status_code == 200, granted.text
        jobs = []
        for name, (text, collection, metadata, uploader) in DOCUMENTS.items():
            response = httpx.post(
                f"{server.url}/documents",
                headers=_headers(server, uploader),
                data={"collection": collection, "metadata": json.dumps(metadata)},
                files={"file": (name, text_document(text), "text/plain")},
                timeout=60,
            )
            assert response.status_code == 202, response.text
            jobs.append(response.json()["job_id"])
        _wait_for_jobs(server, admin, jobs)
        yield server


def _sign_in(page: Any, live: LiveServer, username: str) -> None:
    sign_in_with_form(page, live.url, username, PASSWORD)


def _sign_out(page: Any) -> None:
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("User name", exact=True)).to_be_visible()


def _go(page: Any, section: str) -> None:
    page.get_by_role("navigation", name="Sections").get_by_role("link", name=section).click()


def _collection_row(page: Any, name: str) -> Any:
    table = page.get_by_role("table", name="Collections you may read")
    return table.get_by_role("row").filter(has=page.get_by_role("cell", name=name, exact=True))


def _collection_names(page: Any) -> list[str]:
    table = page.get_by_role("table", name="Collections you may read")
    names: list[str] = table.locator("tbody tr td.name").all_inner_texts()
    return names


def _document(live: LiveServer, name: str) -> dict[str, Any]:
    listed = httpx.get(f"{live.url}/documents", headers=_headers(live, "ada")).json()["data"]
    found = [d for d in listed if d["source"] == name]
    assert len(found) == 1, listed
    return found[0]


def _confirm(page: Any, action: str) -> None:
    page.get_by_role("dialog").get_by_role("button", name=action, exact=True).click()


def _bodies(page: Any, path: str) -> list[Any]:
    """The JSON bodies the page POSTs to `path`, as they are sent."""
    sent: list[Any] = []
    page.on("request", lambda r: sent.append(r.post_data_json) if r.url.endswith(path) else None)
    return sent


def test_admin_manages_collections_groups_and_access(live: LiveServer, page: Any) -> None:
    _sign_in(page, live, "ada")
    _go(page, "Collections")
    expect(page.get_by_role("heading", name="Collections", exact=True)).to_be_focused()
    expect(_collection_row(page, "general")).to_contain_text("manage")
    expect(_collection_row(page, "projects")).to_contain_text("Only those given access")

    # Create: a taken name (409) and a name shaped like an id (422) are explained.
    page.get_by_label("Name of the new collection").fill("projects")
    page.get_by_role("button", name="Create collection").click()
    expect(page.get_by_role("alert").filter(has_text="refused")).to_contain_text(
        "a collection named 'projects' already exists"
    )
    page.get_by_label("Name of the new collection").fill("col_0123456789ab")
    page.get_by_role("button", name="Create collection").click()
    expect(page.get_by_role("alert").filter(has_text="refused")).to_contain_text(
        "may not look like an id"
    )
    page.get_by_label("Name of the new collection").fill("board")
    page.get_by_label("Its description").fill("Minutes of the board")
    page.get_by_label("Who reads it", exact=True).select_option(label="Only those given access")
    page.get_by_role("button", name="Create collection").click()
    expect(page.get_by_role("status").filter(has_text="Created")).to_have_text(
        "Created the collection board."
    )
    expect(_collection_row(page, "board")).to_contain_text("Minutes of the board")

    # A group with max in it.
    page.get_by_label("Name of the new group").fill("directors")
    page.get_by_role("button", name="Create group").click()
    page.get_by_label("New member of directors").select_option(label="max")
    page.get_by_role("button", name="Add to directors").click()
    expect(page.get_by_role("button", name="Remove max from directors")).to_be_visible()

    # Access to board: the group writes, rex reads; an unknown user is refused, in words.
    page.get_by_role("button", name="Manage board").click()
    expect(page.get_by_role("heading", name="Manage “board”")).to_be_focused()
    expect(page.get_by_text("Only admins and the groups and users below")).to_be_visible()
    page.get_by_label("Give access to").select_option(label="a group")
    page.get_by_label("Its name").fill("directors")
    page.get_by_label("Access to give").select_option("write")
    page.get_by_role("button", name="Give access").click()
    expect(page.get_by_label("Access of group directors", exact=True)).to_have_value("write")
    page.get_by_label("Give access to").select_option(label="a user")
    page.get_by_label("Its name").fill("rex")
    page.get_by_label("Access to give").select_option("read")
    page.get_by_role("button", name="Give access").click()
    expect(page.get_by_label("Access of user rex", exact=True)).to_have_value("read")
    page.get_by_label("Its name").fill("nobody-at-all")
    page.get_by_role("button", name="Give access").click()
    expect(page.get_by_role("alert").filter(has_text="Giving access")).to_contain_text("refused")
    stored = httpx.get(
        f"{live.url}/collections/board/access", headers=_headers(live, "ada")
    ).json()["grants"]
    assert sorted(g["permission"] for g in stored) == ["read", "write"]
    # A renamed group keeps its access, shown under the new name.
    page.get_by_role("button", name="Rename group directors").click()
    page.get_by_label("New name of directors").fill("directors-2026")
    page.get_by_role("button", name="Save the name of directors").click()
    expect(page.get_by_label("Access of group directors-2026", exact=True)).to_have_value("write")

    # Rename: a taken name is a 409 shown in the panel; a free one is saved and listed.
    page.get_by_label("Collection name").fill("general")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("alert").filter(has_text="Saving")).to_contain_text(
        "a collection named 'general' already exists"
    )
    page.get_by_label("Collection name").fill("board-minutes")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("heading", name="Manage “board-minutes”")).to_be_visible()
    expect(_collection_row(page, "board-minutes")).to_be_visible()
    assert page.evaluate(A11Y_AUDIT) == {"unnamed": [], "low": []}
    screenshot(page, "access-admin-collections.png")

    # Move pump.txt into it and edit its metadata; a bad field name is a 422 in words.
    _go(page, "Documents & Ask")
    page.get_by_role("button", name="Details of pump.txt").click()
    dialog = page.get_by_role("dialog", name="Details of “pump.txt”")
    expect(dialog.get_by_label("Value of field 1")).to_have_value("engineering")
    expect(dialog.get_by_label("Kind of field 2")).to_have_value("number")
    dialog.get_by_role("button", name="Add a field").click()
    dialog.get_by_label("Name of field 3").fill("Bad Key")
    dialog.get_by_label("Value of field 3").fill("ops")
    dialog.get_by_role("button", name="Save").click()
    expect(dialog.get_by_role("alert")).to_contain_text("must match")
    dialog.get_by_label("Name of field 3").fill("owner")
    dialog.get_by_label("Value of field 2").fill("2026")
    dialog.get_by_label("Collection of this document").select_option(label="board-minutes")
    dialog.get_by_role("button", name="Save").click()
    expect(dialog.get_by_role("status")).to_have_text(
        "“pump.txt”: moved to board-minutes, metadata saved."
    )
    screenshot(page, "access-admin-metadata.png")
    dialog.get_by_role("button", name="Close").click()
    pump = _document(live, "pump.txt")
    assert pump["collection"] == "board-minutes"
    assert pump["metadata"] == {"department": "engineering", "year": 2026, "owner": "ops"}

    # Delete board-minutes: it holds pump.txt, so the 409 is explained and nothing goes until
    # "Delete with documents" is chosen.
    _go(page, "Collections")
    page.get_by_role("button", name="Manage board-minutes").click()
    page.get_by_role("button", name="Delete collection").click()
    _confirm(page, "Delete")
    expect(page.get_by_role("dialog", name="Delete its documents too?")).to_be_visible()
    _confirm(page, "Cancel")
    expect(page.get_by_role("alert").filter(has_text="was not deleted")).to_contain_text(
        "it holds documents"
    )
    assert _document(live, "pump.txt")["collection"] == "board-minutes"
    page.get_by_role("button", name="Delete collection").click()
    _confirm(page, "Delete")
    _confirm(page, "Delete with documents")
    expect(page.get_by_role("status").filter(has_text="Deleted the collection")).to_have_text(
        "Deleted the collection board-minutes and its documents.", timeout=60_000
    )
    expect(_collection_row(page, "board-minutes")).to_have_count(0)
    listed = httpx.get(f"{live.url}/documents", headers=_headers(live, "ada")).json()["data"]
    assert "pump.txt" not in [d["source"] for d in listed]


def test_filters_narrow_search_and_ask(live: LiveServer, page: Any) -> None:
    searched = _bodies(page, "/search")
    asked = _bodies(page, "/query/stream")
    _sign_in(page, live, "ada")
    results = page.get_by_role("list", name="Passages found")
    page.get_by_label("Question", exact=True).fill("plant crew nine days")
    page.get_by_role("button", name="Search passages").click()
    expect(results.get_by_role("listitem").first).to_be_visible()
    everything = set(re.findall(r"\w+\.txt", results.inner_text()))
    assert {"leave.txt", "roadmap.txt"} <= everything
    assert "filters" not in searched[-1]

    # department is hr: only leave.txt.
    page.get_by_role("button", name="Add a filter").click()
    page.get_by_label("Field of filter 1").fill("department")
    page.get_by_label("Value of filter 1").fill("hr")
    page.get_by_role("button", name="Search passages").click()
    expect(page.get_by_role("status").filter(has_text="passages found")).to_be_visible()
    expect(results).to_contain_text("leave.txt")
    expect(results).not_to_contain_text("roadmap.txt")
    assert searched[-1]["filters"] == {"department": {"$eq": "hr"}}

    # And year at least 2025 (a number, as the documents hold it): nothing matches both, and
    # the page says so instead of showing everything.
    page.get_by_role("button", name="Add a filter").click()
    page.get_by_label("Field of filter 2").fill("year")
    page.get_by_label("Condition of filter 2").select_option(label="is at least")
    page.get_by_label("Value of filter 2").fill("2025")
    page.get_by_role("button", name="Search passages").click()
    expect(page.get_by_role("status").filter(has_text="No passage matches")).to_have_text(
        "No passage matches in what you chose to search."
    )
    expect(results).to_be_hidden()
    assert searched[-1]["filters"] == {
        "$and": [{"department": {"$eq": "hr"}}, {"year": {"$gte": 2025}}]
    }

    # A filter without a value is caught before anything is sent.
    page.get_by_label("Value of filter 2").fill("")
    sent = len(searched)
    page.get_by_role("button", name="Search passages").click()
    expect(page.get_by_role("status").filter(has_text="Filter 2")).to_have_text(
        "Filter 2: enter a value."
    )
    assert len(searched) == sent

    # Ask with one filter left: the question reads only engineering documents.
    page.get_by_role("button", name="Remove filter 1").click()
    page.get_by_label("Field of filter 1").fill("department")  # the year row, renumbered
    page.get_by_label("Condition of filter 1").select_option(label="is")
    page.get_by_label("Value of filter 1").fill("engineering")
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="Answered")).to_be_visible(timeout=60_000)
    assert asked[-1]["filters"] == {"department": {"$eq": "engineering"}}
    expect(page.locator("#citations")).not_to_contain_text("leave.txt")
    screenshot(page, "access-filters.png")
    # On a phone a filter row wraps inside the card: no control leaves the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    for name in ("Field of filter 1", "Condition of filter 1", "Value of filter 1"):
        box = page.get_by_label(name).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, (name, box)
    box = page.get_by_role("button", name="Remove filter 1").bounding_box()
    assert box is not None and box["x"] + box["width"] <= 390, box
    screenshot(page, "access-filters-phone.png")


def test_member_manager_reader_and_signed_out(live: LiveServer, page: Any) -> None:
    # Signed out: the Collections address shows the sign-in form and asks for nothing.
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    page.goto(f"{live.url}/#collections")
    expect(page.get_by_label("User name", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Collections")).to_be_hidden()
    api = [url for url in seen if "/static/" not in url and url.rstrip("/") != live.url]
    assert api == [], api  # nothing asked of the API without a token

    # max, a member: no admin controls; he manages projects (his grant) and gives a group
    # access to it by name, seeing users by id only.
    page.get_by_label("User name", exact=True).fill("max")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    _go(page, "Collections")
    expect(page.get_by_role("heading", name="Collections", exact=True)).to_be_visible()
    expect(page.get_by_label("Name of the new collection")).to_be_hidden()
    expect(page.get_by_role("heading", name="Groups")).to_be_hidden()
    expect(page.get_by_role("button", name="Manage general")).to_have_count(0)
    expect(_collection_row(page, "projects")).to_contain_text("manage")
    made = httpx.post(
        f"{live.url}/groups", json={"name": "planners"}, headers=_headers(live, "ada")
    )
    assert made.status_code == 201, made.text
    page.get_by_role("button", name="Manage projects").click()
    expect(page.get_by_label("Access of user max", exact=True)).to_have_value("manage")
    page.get_by_label("Its name").fill("planners")
    page.get_by_role("button", name="Give access").click()
    expect(page.get_by_role("status").filter(has_text="now has")).to_have_text(
        "The group planners now has read access."
    )
    planners = made.json()["group_id"]  # a member may not list groups: shown by id
    expect(page.get_by_label(f"Access of group {planners}", exact=True)).to_have_value("read")
    assert page.evaluate(A11Y_AUDIT) == {"unnamed": [], "low": []}
    screenshot(page, "access-member-manager.png")

    # A document in general that ada uploaded: the server refuses max's change (403), in words.
    _go(page, "Documents & Ask")
    page.get_by_role("button", name="Details of leave.txt").click()
    dialog = page.get_by_role("dialog", name="Details of “leave.txt”")
    dialog.get_by_label("Value of field 1").fill("people")
    dialog.get_by_role("button", name="Save").click()
    expect(dialog.get_by_role("alert")).to_contain_text("not allowed")
    assert _document(live, "leave.txt")["metadata"]["department"] == "hr"
    dialog.get_by_role("button", name="Close").click()
    _sign_out(page)

    # rex, a reader: reads general only, changes nothing, sees the metadata read-only.
    _sign_in(page, live, "rex")
    _go(page, "Collections")
    expect(_collection_row(page, "general")).to_contain_text("read")
    assert "projects" not in _collection_names(page)
    expect(page.get_by_role("button", name=re.compile("^Manage"))).to_have_count(0)
    expect(page.get_by_label("Name of the new collection")).to_be_hidden()
    _go(page, "Documents & Ask")
    expect(page.get_by_role("button", name="Details of roadmap.txt")).to_have_count(0)
    page.get_by_role("button", name="Details of leave.txt").click()
    dialog = page.get_by_role("dialog", name="Details of “leave.txt”")
    expect(dialog.get_by_text("You may read this document's details")).to_be_visible()
    expect(dialog.get_by_label("Value of field 1")).to_be_disabled()
    expect(dialog.get_by_label("Value of field 1")).to_have_value("hr")
    expect(dialog.get_by_role("button", name="Save")).to_have_count(0)
    expect(dialog.get_by_role("button", name="Add a field")).to_have_count(0)
    screenshot(page, "access-reader-details.png")
