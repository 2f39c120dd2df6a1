"""The collection pickers of the web app in Chromium, as an admin, a member with one grant and
a reader with none: an upload goes to the collection picked, a question reads the collection
picked, and nobody is offered a collection they cannot use."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from browser import drop_files, screenshot
from playwright.sync_api import expect

from testkit.builders import text_document
from testkit.live_server import LiveServer
from tests.api.browser import sign_in_with_form

pytestmark = pytest.mark.integration

PASSWORD = "web collections password"
T = "web-collections"
JOB_TIMEOUT_MS = 180_000


def _headers(live: LiveServer, username: str) -> dict[str, str]:
    response = httpx.post(
        f"{live.url}/auth/token", data={"username": username, "password": PASSWORD}
    )
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(
        tmp_path_factory.mktemp("web-collections") / "data",
        {"RAG_RATE_LIMIT_AUTH_PER_MINUTE": "100"},
    )
    server.create_user(T, "ada", PASSWORD)  # the tenant's admin
    server.create_user(T, "max", PASSWORD, role="member")
    server.create_user(T, "rex", PASSWORD, role="reader")
    with server.running():
        admin = _headers(server, "ada")
        made = httpx.post(
            f"{server.url}/collections",
            json={"name": "board", "visibility": "restricted"},
            headers=admin,
        )
        assert made.status_code == 201, made.text
        max_id = httpx.get(f"{server.url}/auth/me", headers=_headers(server, "max")).json()[
            "user_id"
        ]
        granted = httpx.put(
            f"{server.url}/collections/board/access",
            json={"grants": [{"user_id": max_id, "permission": "write"}]},
            headers=admin,
        )
        assert granted.status_code == 200, granted.text
        yield server


def _sign_in(page: Any, live: LiveServer, username: str) -> None:
    sign_in_with_form(page, live.url, username, PASSWORD)


def _options(page: Any, label: str) -> list[str]:
    picker = page.get_by_label(label, exact=True)
    texts: list[str] = picker.locator("option").all_inner_texts()
    return texts


def test_a_member_with_a_grant_uploads_into_it_and_a_reader_never_sees_it(
    live: LiveServer, page: Any
) -> None:
    _sign_in(page, live, "max")
    expect(page.get_by_label("Collection", exact=True)).to_be_visible()
    assert _options(page, "Collection") == ["board", "general"]
    assert _options(page, "Search in") == [
        "Every collection I can read",
        "board (0)",
        "general (0)",
    ]
    page.get_by_label("Collection", exact=True).select_option(label="board")
    drop_files(
        page, [("minutes.txt", text_document("The board meets on Thursdays."), "text/plain")]
    )
    row = page.get_by_role("row", name="minutes.txt")
    expect(row).to_contain_text("done", timeout=JOB_TIMEOUT_MS)
    screenshot(page, "collections-member.png")
    listed = httpx.get(f"{live.url}/documents", headers=_headers(live, "ada")).json()["data"]
    assert [d["collection"] for d in listed if d["source"] == "minutes.txt"] == ["board"]

    page.get_by_role("button", name="Sign out").click()
    _sign_in(page, live, "rex")
    expect(page.get_by_role("row", name="minutes.txt")).to_have_count(0)
    assert not page.get_by_label("Collection", exact=True).is_visible()
    assert not page.get_by_label("Search in", exact=True).is_visible()  # general alone
    screenshot(page, "collections-reader.png")


def test_an_admin_picks_what_a_question_reads(live: LiveServer, page: Any) -> None:
    _sign_in(page, live, "ada")
    assert "board (1)" in _options(page, "Search in") or "board (0)" in _options(page, "Search in")
    asked: list[Any] = []
    page.on(
        "request",
        lambda r: asked.append(r.post_data_json) if r.url.endswith("/query/stream") else None,
    )
    page.get_by_label("Search in", exact=True).select_option(label=_options(page, "Search in")[1])
    page.get_by_label("Question", exact=True).fill("When does the board meet?")
    page.get_by_role("button", name="Ask").click()
    expect(page.get_by_role("status").filter(has_text="Answered")).to_be_visible(timeout=60_000)
    board = httpx.get(f"{live.url}/collections/board", headers=_headers(live, "ada")).json()
    assert asked and asked[-1]["collections"] == [board["collection_id"]]
    screenshot(page, "collections-admin.png")
