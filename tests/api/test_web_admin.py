"""The web app's Account, Users and Activity views in Chromium against a live server, driven by
visible labels and roles, as an admin, a member and a reader: each role sees only the controls
it may use; an admin adds a user, changes its role, disables it (it can no longer sign in) and
meets the last-admin rule; a key made in the Account view is shown once, works over HTTP and
stops working when revoked there; a password change signs the other sessions out."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from browser import A11Y_AUDIT, PAST_THE_EDGES, PHONE, SMALLEST_PHONE, brightness, screenshot
from playwright.sync_api import expect

from app.services.audit import ACTIONS
from testkit.builders import text_document
from testkit.live_server import LiveServer
from tests.api.browser import sign_in_with_form

pytestmark = pytest.mark.integration

TENANT = "web-admin"
PASSWORD = "web admin password"
NEW_PASSWORD = "a brand new web admin password"
SIGNED_OUT = "You are signed out."
SESSION_ENDED = "Your session has ended; sign in again."
PASSWORD_CHANGED = "Your password has changed; sign in with the new one."
LAST_ADMIN = "the tenant must keep at least one enabled admin"
# A user name as long as people's get (30 characters): the top bar must still fit a phone.
LONG_USER = "konstantina.papadopoulos-weber"
# ada is the tenant's first user, so its admin; the others get their role from the CLI.
USERS = {
    "ada": "admin",
    "mel": "member",
    "rex": "reader",
    "pat": "member",
    "kim": "reader",
    LONG_USER: "member",
}
NAV_ALL = ["Documents & Ask", "Account", "Collections", "Quality", "Users", "Activity"]
NAV_MEMBER = ["Documents & Ask", "Account", "Collections", "Quality"]
NAV_OWN = ["Documents & Ask", "Account", "Collections"]
# A file name that is one long word: the documents list must still fit a phone.
LONG_NAME = "quarterly-maintenance-report-for-the-north-sea-wind-farm-2026-final-version.txt"
# What a section's heading is, to wait for it to open.
HEADINGS = {
    "Documents & Ask": "Documents",
    "Account": "Change password",
    "Collections": "Collections",
    "Quality": "Test retrieval",
    "Users": "Users",
    "Activity": "Activity",
}
# The headers of a table that are not wholly inside the box it scrolls in, as it is shown.
CUT_HEADERS = """(table) => {
  const view = table.parentElement.getBoundingClientRect();
  return [...table.querySelectorAll("th")].filter((th) => th.getClientRects().length)
    .filter((th) => {
      const box = th.getBoundingClientRect();
      return box.left < view.left - 0.5 || box.right > view.right + 0.5;
    }).map((th) => th.textContent.trim());
}"""
# How many lines an element's text takes on screen.
LINES = """(e) => Math.round(
  e.getBoundingClientRect().height / parseFloat(getComputedStyle(e).lineHeight))"""
# The controls of the top bar and the open section that scrolling (the page or their table)
# does not bring under a finger: off the screen, or covered by something else.
OUT_OF_REACH = """() => {
  const missed = [];
  const controls = "header a[href], header button, " +
    "main button, main a[href], main input, main select, main textarea";
  for (const e of document.querySelectorAll(controls)) {
    if (!e.getClientRects().length || e.closest(".visually-hidden")) continue;
    e.scrollIntoView({ block: "center", inline: "center" });
    const box = e.getBoundingClientRect();
    const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
    const onIt = hit && (e.contains(hit) || [...(e.labels || [])].some((l) => l.contains(hit)));
    if (!onIt) missed.push(`${e.tagName} "${e.getAttribute("aria-label") || e.textContent}"`);
  }
  for (const scroller of document.querySelectorAll(".table-scroll")) scroller.scrollLeft = 0;
  window.scrollTo(0, 0);
  return missed;
}"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # Every test signs in several times from 127.0.0.1: the per-IP login budget is not tested here.
    server = LiveServer(
        tmp_path_factory.mktemp("web-admin") / "data",
        {"RAG_RATE_LIMIT_AUTH_PER_MINUTE": "1000", "RAG_RATE_LIMIT_KEYS_PER_MINUTE": "1000"},
    )
    for username, role in USERS.items():
        server.cli(
            "create-user",
            "--tenant",
            TENANT,
            "--username",
            username,
            "--password-stdin",
            "--role",
            role,
            stdin=PASSWORD + "\n",
        )
    with server.running():
        # One upload by the admin and one by the member: who may delete which differs by role;
        # and one with a long name.
        for username, name in (
            ("ada", "ada-note.txt"),
            ("mel", "mel-note.txt"),
            ("ada", LONG_NAME),
        ):
            note = text_document(f"{username} wrote that the AUK pump is serviced every 9 days.")
            response = httpx.post(
                f"{server.url}/documents",
                headers=_bearer(_token(server, username)),
                files={"file": (name, note, "text/plain")},
                timeout=60,
            )
            assert response.status_code == 202, response.text
        yield server


@pytest.fixture
def page(browser: Any, live: LiveServer) -> Iterator[Any]:
    browser.grant_permissions(["clipboard-read", "clipboard-write"], origin=live.url)
    opened = browser.new_page()
    yield opened
    opened.close()


def _token(live: LiveServer, username: str, password: str = PASSWORD) -> str:
    response = httpx.post(
        f"{live.url}/auth/token", data={"username": username, "password": password}, timeout=30
    )
    assert response.status_code == 200, response.text
    token: str = response.json()["access_token"]
    return token


def _bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


def _sign_in(page: Any, live: LiveServer, username: str, password: str = PASSWORD) -> None:
    sign_in_with_form(page, live.url, username, password)


def _nav(page: Any) -> Any:
    return page.get_by_role("navigation", name="Sections")


def _go(page: Any, section: str) -> None:
    _nav(page).get_by_role("link", name=section, exact=True).click()


def _nav_names(page: Any) -> list[str]:
    return [link.inner_text() for link in _nav(page).get_by_role("link").all()]


def _assert_accessible(page: Any) -> None:
    page.wait_for_load_state("networkidle")
    audit = page.evaluate(A11Y_AUDIT)
    assert audit == {"unnamed": [], "low": []}, audit


def _users_row(page: Any, username: str) -> Any:
    users = page.get_by_role("table", name="Users of your tenant")
    return users.get_by_role("row").filter(has=page.get_by_role("cell", name=username, exact=True))


def test_each_role_sees_only_the_controls_it_may_use(live: LiveServer, page: Any) -> None:
    # Admin: every section, every document's Delete.
    _sign_in(page, live, "ada")
    assert _nav_names(page) == NAV_ALL
    expect(page.get_by_text("Choose files")).to_be_visible()
    for name in ("ada-note.txt", "mel-note.txt"):
        expect(page.get_by_role("button", name=f"Delete {name}", exact=True)).to_be_visible()
    # The list says who uploaded each document.
    expect(page.get_by_role("row", name=re.compile("mel-note.txt.*done.*mel"))).to_be_visible()
    expect(_nav(page).get_by_role("link", name="Documents & Ask")).to_have_attribute(
        "aria-current", "page"
    )
    _assert_accessible(page)
    screenshot(page, "30-admin-documents.png")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_text(SIGNED_OUT)).to_be_visible()

    # Member: uploads, deletes only its own upload, no Users or Activity.
    _sign_in(page, live, "mel")
    assert _nav_names(page) == NAV_MEMBER
    expect(page.get_by_text("Choose files")).to_be_visible()
    expect(page.get_by_role("button", name="Delete mel-note.txt", exact=True)).to_be_visible()
    expect(page.get_by_role("row", name=re.compile("ada-note.txt"))).to_be_visible()
    expect(page.get_by_role("button", name="Delete ada-note.txt", exact=True)).to_have_count(0)
    screenshot(page, "31-member-documents.png")
    page.get_by_role("button", name="Sign out").click()

    # Reader: asks and reads, uploads and deletes nothing; told why.
    _sign_in(page, live, "rex")
    assert _nav_names(page) == NAV_OWN
    expect(page.get_by_text("Choose files")).to_be_hidden()
    expect(page.get_by_role("row", name=re.compile("ada-note.txt"))).to_be_visible()
    expect(page.get_by_role("button", name=re.compile("^Delete"))).to_have_count(0)
    expect(page.get_by_text("Your role is reader")).to_be_visible()
    expect(page.get_by_label("Question")).to_be_visible()
    _assert_accessible(page)
    screenshot(page, "32-reader-documents.png")
    # An admin's address typed by hand opens Documents & Ask, and no admin data is asked for.
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url))
    page.goto(f"{live.url}/#users")
    expect(page.get_by_role("heading", name="Documents")).to_be_visible()
    expect(page.get_by_role("heading", name="Users")).to_be_hidden()
    page.goto(f"{live.url}/#activity")
    expect(page.get_by_role("heading", name="Activity")).to_be_hidden()
    page.wait_for_load_state("networkidle")
    assert not [url for url in seen if "/users" in url or "/audit" in url], seen


def test_sections_are_reached_with_the_keyboard(live: LiveServer, page: Any) -> None:
    _sign_in(page, live, "ada")
    page.locator(".skip-link").focus()
    page.keyboard.press("Tab")
    expect(_nav(page).get_by_role("link", name="Documents & Ask")).to_be_focused()
    page.keyboard.press("Tab")
    expect(_nav(page).get_by_role("link", name="Account")).to_be_focused()
    page.keyboard.press("Enter")
    # The section's heading takes the focus, so the next Tab starts in it.
    expect(page.get_by_role("heading", name="Change password")).to_be_focused()
    expect(_nav(page).get_by_role("link", name="Account")).to_have_attribute("aria-current", "page")
    expect(page.get_by_role("heading", name="Documents")).to_be_hidden()
    page.keyboard.press("Tab")
    expect(page.get_by_label("Current password")).to_be_focused()
    for section, heading in (("Users", "Users"), ("Activity", "Activity")):
        _nav(page).get_by_role("link", name=section).focus()
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_focused()
    # Back returns to the previous section; a reload stays where it is.
    page.go_back()
    expect(page.get_by_role("heading", name="Users", exact=True)).to_be_visible()
    page.reload()
    expect(page.get_by_role("heading", name="Users", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Activity", exact=True)).to_be_hidden()
    # On a phone the top bar wraps and every section stays reachable.
    page.set_viewport_size({"width": 390, "height": 844})
    for section in NAV_ALL:
        expect(_nav(page).get_by_role("link", name=section, exact=True)).to_be_in_viewport()
    screenshot(page, "40-phone-users.png")
    _go(page, "Account")
    screenshot(page, "41-phone-account.png")


def test_every_section_fits_a_phone_in_every_role(live: LiveServer, page: Any) -> None:
    # A common phone (360 px) and the narrowest still in use (320 px; an admin's documents
    # list had its buttons 14 px past the card there).
    phones = (PHONE, SMALLEST_PHONE)
    page.goto(f"{live.url}/")
    expect(page.get_by_label("User name", exact=True)).to_be_visible()
    for phone in phones:
        page.set_viewport_size(phone)
        assert page.evaluate(PAST_THE_EDGES) == [], phone
        screenshot(page, f"42-phone-{phone['width']}-sign-in.png")
    documents = page.get_by_role("table", name="Your documents")
    for username, sections in (("ada", NAV_ALL), ("mel", NAV_MEMBER), ("rex", NAV_OWN)):
        _sign_in(page, live, username)
        assert _nav_names(page) == sections
        for section in sections:
            _go(page, section)
            expect(page.get_by_role("heading", name=HEADINGS[section], exact=True)).to_be_focused()
            page.wait_for_load_state("networkidle")
            for phone in phones:
                page.set_viewport_size(phone)
                where = (username, section, phone["width"])
                assert page.evaluate(PAST_THE_EDGES) == [], where
                assert page.evaluate(OUT_OF_REACH) == [], where
                name = section.split()[0].lower()
                screenshot(page, f"43-phone-{phone['width']}-{username}-{name}.png")
        # The documents list fits without scrolling: its headers were cut ("Sta|tus") and its
        # buttons off to the right. What it leaves out on a phone, the Details dialog shows.
        _go(page, "Documents & Ask")
        for phone in phones:
            page.set_viewport_size(phone)
            expect(documents.get_by_role("cell", name=LONG_NAME, exact=True)).to_be_visible()
            assert documents.evaluate(CUT_HEADERS) == [], (username, phone["width"])
            expect(documents.get_by_role("columnheader", name="Status")).to_be_visible()
            expect(documents.get_by_role("columnheader", name="Size")).to_be_hidden()
            page.get_by_role("button", name=f"Details of {LONG_NAME}").click()
            dialog = page.get_by_role("dialog", name=f"Details of “{LONG_NAME}”")
            expect(dialog).to_contain_text("Uploaded byada")
            expect(dialog).to_contain_text("Pages1")
            # The dialog's border too.
            assert page.evaluate(PAST_THE_EDGES) == [], (username, phone["width"])
            dialog.get_by_role("button", name="Close").click()
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_label("User name", exact=True)).to_be_visible()

    # A table that scrolls sideways shows it: a shadow on the edge with columns beyond it.
    page.set_viewport_size(PHONE)
    _sign_in(page, live, "rex")
    _go(page, "Collections")
    scroller = page.locator(".table-scroll").filter(
        has=page.get_by_role("table", name="Collections you may read")
    )
    box = scroller.bounding_box()
    assert box is not None
    # Just inside each edge, in the header row's top padding (no text there).
    left, right, y = 2, int(box["width"]) - 3, 3
    at_start = scroller.screenshot()
    assert brightness(page.context, at_start, right, y) < 235
    assert brightness(page.context, at_start, left, y) > 250
    scroller.evaluate("(e) => { e.scrollLeft = e.scrollWidth; }")
    at_end = scroller.screenshot()
    assert brightness(page.context, at_end, right, y) > 250
    assert brightness(page.context, at_end, left, y) < 235
    page.get_by_role("button", name="Sign out").click()

    # A wide screen keeps every column.
    page.set_viewport_size({"width": 1280, "height": 800})
    _sign_in(page, live, "rex")
    for column in ("Name", "Size", "Pages", "Chunks", "Status", "Uploaded by"):
        expect(documents.get_by_role("columnheader", name=column)).to_be_visible()
    assert documents.evaluate(CUT_HEADERS) == []
    screenshot(page, "44-wide-reader-documents.png")


def test_the_signed_in_name_keeps_one_line_on_a_phone(live: LiveServer, page: Any) -> None:
    # "Signed in as" wrapped over "mel" on a 360 px phone, and a long name ran the page past
    # the screen's edge; now a name too long for the screen ends in an ellipsis, whole in the
    # text and the title, and every control of the top bar stays on the screen.
    for phone in (PHONE, SMALLEST_PHONE):
        page.set_viewport_size(phone)
        for username in ("mel", LONG_USER):
            where = (username, phone["width"])
            _sign_in(page, live, username)
            signed_in = page.get_by_text("Signed in as")
            assert signed_in.evaluate(LINES) == 1, where
            expect(signed_in).to_have_attribute("title", f"Signed in as {username}")
            if username == "mel":  # a short name is not cut
                assert signed_in.evaluate("(e) => e.scrollWidth <= e.clientWidth"), where
            assert page.evaluate(PAST_THE_EDGES) == [], where
            assert page.evaluate(OUT_OF_REACH) == [], where  # the top bar's links and button
            screenshot(page, f"45-phone-{phone['width']}-{username[:3]}-top-bar.png")
            page.get_by_role("button", name="Sign out").click()
            expect(page.get_by_label("User name", exact=True)).to_be_visible()


def test_admin_adds_a_user_changes_its_role_and_disables_it(
    live: LiveServer, page: Any, browser: Any
) -> None:
    mel = _token(live, "mel")
    made = httpx.post(f"{live.url}/auth/keys", headers=_bearer(mel), json={"name": "mel script"})
    assert made.status_code == 201, made.text
    mel_key = made.json()["key"]
    _sign_in(page, live, "ada")
    _go(page, "Users")
    expect(page.get_by_role("heading", name="Users", exact=True)).to_be_visible()
    for username in USERS:
        expect(_users_row(page, username)).to_be_visible()

    # Every user's keys, with their owner; an admin revokes another user's key.
    keys = page.get_by_role("table", name="API keys of all users")
    expect(keys.get_by_role("row", name=re.compile("mel mel script"))).to_be_visible()
    keys.get_by_role("button", name="Revoke mel script of mel").click()
    page.get_by_role("dialog", name="Revoke API key?").get_by_role("button", name="Revoke").click()
    expect(page.get_by_text("Revoked “mel script”.")).to_be_visible()
    expect(keys.get_by_role("row", name=re.compile("mel script"))).to_have_count(0)
    assert httpx.get(f"{live.url}/auth/me", headers=_bearer(mel_key)).status_code == 401
    assert httpx.get(f"{live.url}/auth/me", headers=_bearer(mel)).status_code == 200

    # A weak password is refused with the rule, and nobody is added.
    page.get_by_label("Name of the new user").fill("nia")
    page.get_by_label("Initial password").fill("short")
    page.get_by_label("Role", exact=True).select_option("reader")
    page.get_by_role("button", name="Add user").click()
    expect(page.get_by_role("alert").filter(has_text="at least 12 characters")).to_be_visible()
    expect(_users_row(page, "nia")).to_have_count(0)

    page.get_by_label("Initial password").fill("quiet river stone seventy")
    page.get_by_role("button", name="Add user").click()
    expect(page.get_by_role("status").filter(has_text="Added nia (reader).")).to_be_visible()
    expect(page.get_by_label("Role of nia")).to_have_value("reader")
    nia_token = _token(live, "nia", "quiet river stone seventy")
    assert httpx.get(f"{live.url}/auth/me", headers=_bearer(nia_token)).json()["role"] == "reader"

    page.get_by_label("Role of nia").select_option("member")
    expect(page.get_by_text("nia is now member.")).to_be_visible()
    me = httpx.get(f"{live.url}/auth/me", headers=_bearer(nia_token))
    assert me.json()["role"] == "member"
    screenshot(page, "33-users.png")

    # An admin who demotes themself loses Users and Activity at once, and lands on Documents.
    page.get_by_label("Role of nia").select_option("admin")
    expect(page.get_by_text("nia is now admin.")).to_be_visible()
    nia_page = browser.new_page()
    _sign_in(nia_page, live, "nia", "quiet river stone seventy")
    assert _nav_names(nia_page) == NAV_ALL
    _go(nia_page, "Users")
    nia_page.get_by_label("Role of nia").select_option("reader")
    expect(nia_page.get_by_role("heading", name="Documents")).to_be_visible()
    expect(_nav(nia_page).get_by_role("link")).to_have_count(len(NAV_OWN))
    assert nia_page.evaluate("location.hash") == "#documents"
    expect(nia_page.get_by_text("Choose files")).to_be_hidden()
    nia_page.close()
    page.reload()
    expect(page.get_by_label("Role of nia")).to_have_value("reader")

    page.get_by_role("button", name="Disable nia").click()
    expect(page.get_by_text("nia is disabled")).to_be_visible()
    expect(_users_row(page, "nia")).to_contain_text("disabled")
    expect(page.get_by_role("button", name="Enable nia")).to_be_visible()
    # Its session ends at once, and it cannot sign in.
    assert httpx.get(f"{live.url}/auth/me", headers=_bearer(nia_token)).status_code == 401
    other = browser.new_page()
    other.goto(f"{live.url}/")
    other.get_by_label("User name", exact=True).fill("nia")
    other.get_by_label("Password", exact=True).fill("quiet river stone seventy")
    other.get_by_role("button", name="Sign in").click()
    expect(other.get_by_role("alert")).to_have_text("Wrong user name or password.")
    expect(other.get_by_role("heading", name="Documents")).to_be_hidden()
    other.close()

    # The last enabled admin can be neither demoted nor disabled: the page says why and
    # shows the role unchanged.
    page.get_by_label("Role of ada").select_option("reader")
    expect(page.get_by_role("alert")).to_contain_text(LAST_ADMIN)
    expect(page.get_by_label("Role of ada")).to_have_value("admin")
    page.get_by_role("button", name="Disable ada").click()
    expect(page.get_by_role("alert")).to_contain_text(LAST_ADMIN)
    expect(_users_row(page, "ada")).to_contain_text("enabled")
    screenshot(page, "34-users-last-admin.png")
    _assert_accessible(page)

    # Deleting asks first; Cancel keeps the user.
    page.get_by_role("button", name="Delete nia").click()
    dialog = page.get_by_role("dialog", name="Delete user?")
    expect(dialog).to_contain_text("nia will no longer be able to sign in")
    screenshot(page, "35-users-delete-confirm.png")
    dialog.get_by_role("button", name="Cancel").click()
    expect(_users_row(page, "nia")).to_be_visible()
    page.get_by_role("button", name="Delete nia").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(page.get_by_text("Deleted nia.")).to_be_visible()
    expect(_users_row(page, "nia")).to_have_count(0)
    ada = _token(live, "ada")
    names = [
        u["username"] for u in httpx.get(f"{live.url}/users", headers=_bearer(ada)).json()["data"]
    ]
    assert "nia" not in names


def test_activity_is_paged_and_filtered_by_action_and_user(live: LiveServer, page: Any) -> None:
    # 30 keys made and revoked by kim: 60 entries, more than one page of 50.
    kim = _token(live, "kim")
    for number in range(30):
        made = httpx.post(
            f"{live.url}/auth/keys", headers=_bearer(kim), json={"name": f"k{number}"}
        )
        assert made.status_code == 201, made.text
        gone = httpx.delete(f"{live.url}/auth/keys/{made.json()['key_id']}", headers=_bearer(kim))
        assert gone.status_code == 204
    ada = _token(live, "ada")
    total = httpx.get(f"{live.url}/audit?limit=1", headers=_bearer(ada)).json()["count"]
    assert total > 60

    _sign_in(page, live, "ada")
    _go(page, "Activity")
    # The action filter offers exactly the server's actions.
    options = page.get_by_label("Action", exact=True).locator("option")
    expect(options).to_have_text(["Any action", *ACTIONS])
    table = page.get_by_role("table", name="Activity of your tenant, newest first")
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(50)
    pages = page.get_by_role("group", name="Pages of entries")
    expect(pages).to_contain_text(f"Entries 1–50 of {total + 1}")  # ada's sign-in just now
    expect(pages.get_by_role("button", name="Previous")).to_be_disabled()
    # Newest first: ada's sign-in leads, shown by name.
    expect(rows.first).to_contain_text("login.succeeded")
    expect(rows.first).to_contain_text("ada")
    screenshot(page, "36-activity.png")
    _assert_accessible(page)
    pages.get_by_role("button", name="Next").click()
    expect(pages).to_contain_text("Entries 51–")
    expect(pages.get_by_role("button", name="Previous")).to_be_enabled()

    page.get_by_label("Action", exact=True).select_option("key.created")
    page.get_by_label("User", exact=True).select_option(label="kim")
    expect(rows).to_have_count(30)
    for text in rows.all_inner_texts():
        assert "key.created" in text and "kim" in text, text
    expect(page.get_by_role("group", name="Pages of entries")).to_have_count(0)  # one page
    page.get_by_label("User", exact=True).select_option(label="pat")  # made no key
    expect(rows).to_have_count(0)
    expect(page.get_by_text("No activity matches.")).to_be_visible()

    # Sign-out from here leaves only the sign-in form, and none of the log in the page.
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_text(SIGNED_OUT)).to_be_visible()
    assert [b.inner_text() for b in page.get_by_role("button").all()] == ["Sign in"]
    expect(_nav(page)).to_be_hidden()
    assert page.locator("#activity-body tr, #users-body tr, #keys-body tr").count() == 0
    assert "kim" not in page.locator("#activity-view").inner_html()  # nor the user filter
    assert page.evaluate("location.hash") == ""


def test_a_key_is_shown_once_works_and_stops_when_revoked(live: LiveServer, page: Any) -> None:
    _sign_in(page, live, "rex")
    _go(page, "Account")
    # A reader's key can only be a reader's.
    role_options = page.get_by_label("Key role").locator("option")
    expect(role_options).to_have_text(["reader (same as yours)"])
    page.get_by_label("Key name").fill("nightly import")
    page.get_by_label("Expires after (days)").fill("7")
    page.get_by_role("button", name="Create key").click()

    shown = page.get_by_role("region", name=re.compile("New key"))
    expect(shown).to_be_visible()
    expect(shown).to_contain_text("it will not be shown again")
    key: str = page.get_by_label("Your new API key").input_value()
    assert key.startswith("rag_")
    shown.get_by_role("button", name="Copy key").click()
    expect(shown.get_by_role("status")).to_have_text("Copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == key
    screenshot(page, "37-account-new-key.png")
    _assert_accessible(page)

    # The key works from a script, with the reader's role.
    me = httpx.get(f"{live.url}/auth/me", headers=_bearer(key))
    assert me.status_code == 200 and me.json()["role"] == "reader"
    assert me.json()["credential"] == "key"
    assert httpx.get(f"{live.url}/documents", headers=_bearer(key)).status_code == 200

    # Listed by name and prefix, never in full; gone from the page once acknowledged, and
    # not back when the view is opened again.
    row = page.get_by_role("row", name=re.compile("nightly import"))
    expect(row).to_contain_text(key[:8])
    expect(row).to_contain_text("reader")
    shown.get_by_role("button", name="I have stored it").click()
    expect(shown).to_be_hidden()
    _go(page, "Documents & Ask")
    _go(page, "Account")
    assert key not in page.content()
    assert page.get_by_label("Your new API key").input_value() == ""
    expect(row.get_by_role("cell").nth(5)).not_to_have_text("never")  # last used: just now
    screenshot(page, "38-account-keys.png")

    # Revoking asks first, then the key stops working at once.
    page.get_by_role("button", name="Revoke nightly import").click()
    dialog = page.get_by_role("dialog", name="Revoke API key?")
    expect(dialog).to_contain_text("stops working at once")
    dialog.get_by_role("button", name="Revoke").click()
    expect(page.get_by_text("Revoked “nightly import”.")).to_be_visible()
    expect(page.get_by_role("row", name=re.compile("nightly import"))).to_have_count(0)
    expect(page.get_by_text("You have no API keys.")).to_be_visible()
    assert httpx.get(f"{live.url}/auth/me", headers=_bearer(key)).status_code == 401


def test_a_key_on_screen_is_gone_after_sign_out(live: LiveServer, page: Any) -> None:
    _sign_in(page, live, "mel")
    _go(page, "Account")
    # A member may make a reader's key or a member's.
    options = page.get_by_label("Key role").locator("option")
    expect(options).to_have_text(["reader", "member (same as yours)"])
    page.get_by_label("Key name").fill("left on screen")
    page.get_by_label("Key role").select_option("reader")
    page.get_by_role("button", name="Create key").click()
    expect(page.get_by_label("Your new API key")).to_have_value(re.compile("^rag_"))
    key = page.get_by_label("Your new API key").input_value()
    assert key.startswith("rag_")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_text(SIGNED_OUT)).to_be_visible()
    assert key not in page.content()
    # The next person lands on Documents & Ask, with nothing of the last session's views.
    _sign_in(page, live, "rex")
    expect(page.get_by_role("heading", name="Documents")).to_be_visible()
    expect(page.get_by_role("heading", name="API keys")).to_be_hidden()
    assert "left on screen" not in page.content()


def test_password_change_errors_and_other_sessions_signed_out(
    live: LiveServer, page: Any, browser: Any
) -> None:
    other = browser.new_page()  # another tab: its own session of the same user
    _sign_in(other, live, "pat")
    _sign_in(page, live, "pat")
    _go(page, "Account")

    page.get_by_label("Current password").fill("not the password at all")
    page.get_by_label("New password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("alert").filter(has_text="current password is wrong")).to_be_visible()
    expect(page.get_by_label("Current password")).to_be_focused()
    expect(page.get_by_role("heading", name="Change password")).to_be_visible()  # still in

    page.get_by_label("Current password").fill(PASSWORD)
    page.get_by_label("New password").fill("too short")
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("alert").filter(has_text="at least 12 characters")).to_be_visible()
    screenshot(page, "39-account-password-error.png")

    page.get_by_label("New password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_text(PASSWORD_CHANGED)).to_be_visible()
    expect(page.get_by_label("User name", exact=True)).to_be_focused()

    # The other tab is signed out at its next request.
    _go(other, "Account")
    expect(other.get_by_text(SESSION_ENDED)).to_be_visible()
    expect(other.get_by_role("heading", name="Change password")).to_be_hidden()
    other.close()

    # The old password no longer works; the new one does.
    old = httpx.post(f"{live.url}/auth/token", data={"username": "pat", "password": PASSWORD})
    assert old.status_code == 401
    _sign_in(page, live, "pat", NEW_PASSWORD)


def test_a_key_expiry_past_the_limit_is_named_in_words(live: LiveServer, page: Any) -> None:
    # 100000 days was sent and came back as the schema's "expires_in_days: Input should be
    # less than or equal to 3650".
    _sign_in(page, live, "rex")
    _go(page, "Account")
    page.get_by_label("Key name").fill("too long lived")
    for days in ("100000", "0"):
        page.get_by_label("Expires after (days)").fill(days)
        page.get_by_role("button", name="Create key").click()
        expect(
            page.get_by_text("Expiry must be a whole number of days from 1 to 3650, or empty.")
        ).to_be_visible()
        expect(page.get_by_label("Expires after (days)")).to_be_focused()
