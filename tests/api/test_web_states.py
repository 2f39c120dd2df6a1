"""What the web app shows in each state, as a person sees it in Chromium: before sign-in only
the title and the form; signed in, no form; signed out, reloaded, or after any 401 (a tampered,
expired or vanished token), the form again and nothing that needs a token. File names with
markup are shown as text everywhere and never run. A folder of files shows each file's progress
to the end while the page asks the server a few questions per round, not one per file. A failed
document says why in the list, after a reload too, to those who may read jobs; on a phone the
list scrolls inside its card, not the page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import jwt
import pytest
from browser import drop_files, screenshot
from playwright.sync_api import expect

from testkit.builders import text_document
from testkit.live_server import LIVE_JWT_SECRET, LiveServer

pytestmark = pytest.mark.integration

PASSWORD = "web states password"
TITLE = "RAG service"
ORGANISATION_HINT = (
    "Your organisation's id, e.g. acme. Remembered on this device; leave it empty if your user "
    "name is yours alone."
)
SIGN_IN_TEXT = [TITLE, "Sign in", "Organisation", ORGANISATION_HINT, "User name", "Password"]
SIGN_IN_TEXT += ["Sign in"]
TENANT_NEEDED = "Your user name is used in more than one organisation: enter your organisation."
SIGNED_OUT = "You are signed out."
SESSION_ENDED = "Your session has ended; sign in again."
TOKEN_KEY = "rag.token"
JOB_TIMEOUT_MS = 180_000
NOTE = text_document("The KESTREL winch brake is tested every 14 days by the deck crew.")
OTHER_NOTE = text_document("The KESTREL anchor chain is greased every 30 days in harbour.")
# Markup a hostile file name can carry. The server replaces < > " / with _ (upload filename
# rules), so the second name is what survives: entities that innerHTML would turn into a tag,
# and quotes that would break out of a single-quoted attribute. The browser's own upload row
# shows the first name exactly as picked, before the server sees it.
RAW_TAG_NAME = "<img src=x onerror=alert(1)>.txt"
SURVIVING_NAME = "&lt;img src=x onerror=alert(2)&gt;' autofocus onfocus='alert(3).txt"
# Any inline script or handler that markup managed to create is refused by the page's CSP and
# reported here; a dialog (alert) is caught by Playwright's listener.
WATCH_INJECTION = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) =>
  window.cspViolations.push(`${e.violatedDirective} ${e.sample}`));
"""
# Records whether the signed-in view was ever on screen from the first parse of the page.
WATCH_APP_VIEW = """
window.appViewShown = false;
new MutationObserver(() => {
  const view = document.getElementById("app-view");
  if (view && !view.hidden) window.appViewShown = true;
}).observe(document, { subtree: true, childList: true, attributes: true });
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # Every test signs in from 127.0.0.1, several times a minute in all: more than the default
    # per-address login budget, which is tested elsewhere.
    server = LiveServer(
        tmp_path_factory.mktemp("web-states") / "data", {"RAG_RATE_LIMIT_AUTH_PER_MINUTE": "100"}
    )
    for tenant, username in (("states-a", "alice"), ("states-b", "bruno"), ("states-c", "carla")):
        server.create_user(tenant, username, PASSWORD)
    server.create_user("states-d", "dana", PASSWORD)  # the tenant's admin
    server.create_user("states-d", "rita", PASSWORD, role="reader")
    # One name in two organisations: signing in as "sam" needs the organisation.
    server.create_user("states-e", "sam", PASSWORD)
    server.create_user("states-f", "sam", "another web states password")
    with server.running():
        yield server


def _app_controls(page: Any) -> list[Any]:
    """What only a signed-in person may see, found the way a person finds it."""
    return [
        page.get_by_text("Signed in as"),
        page.get_by_role("button", name="Sign out"),
        page.get_by_role("heading", name="Documents"),
        page.get_by_text("Choose files"),
        page.get_by_role("heading", name="Ask", exact=True),
        page.get_by_label("Question"),
        page.get_by_role("button", name="Ask", exact=True),
    ]


def _form_controls(page: Any) -> list[Any]:
    return [
        page.get_by_role("heading", name="Sign in"),
        page.get_by_label("Organisation", exact=True),
        page.get_by_label("User name", exact=True),
        page.get_by_label("Password", exact=True),
        page.get_by_role("button", name="Sign in"),
    ]


def _shown_lines(page: Any) -> list[str]:
    """The page's rendered text, line by line (the off-screen skip link left out)."""
    text: str = page.locator("body").inner_text()
    lines = [line.strip() for line in text.splitlines()]
    return [line for line in lines if line and line != "Skip to content"]


def _buttons(page: Any) -> list[str]:
    """The names of the buttons a person can see (hidden ones are not in the role tree)."""
    return [button.inner_text() for button in page.get_by_role("button").all()]


def assert_signed_out(page: Any, message: str = "") -> None:
    """Only the title, the sign-in form and its message are on screen."""
    for control in _form_controls(page):
        expect(control).to_be_visible()
    for control in _app_controls(page):
        expect(control).to_be_hidden()
    assert _buttons(page) == ["Sign in"]
    assert page.get_by_role("textbox").count() == 3  # organisation, user name and password
    expected = SIGN_IN_TEXT + ([message] if message else [])
    assert _shown_lines(page) == expected
    assert page.get_by_role("heading", name=TITLE).is_visible()


def assert_signed_in(page: Any, username: str) -> None:
    """The app and who is signed in; no sign-in form."""
    for control in _app_controls(page):
        expect(control).to_be_visible()
    for control in _form_controls(page):
        expect(control).to_be_hidden()
    expect(page.get_by_text("Signed in as")).to_have_text(f"Signed in as {username}")
    assert page.get_by_role("heading", name=TITLE).is_visible()


def _sign_in(page: Any, live: LiveServer, username: str) -> None:
    page.goto(f"{live.url}/")
    page.get_by_label("User name", exact=True).fill(username)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    assert_signed_in(page, username)


def _api_requests(page: Any) -> list[str]:
    """Collects the URLs of every API call the page makes from now on (not its own files)."""
    seen: list[str] = []

    def record(request: Any) -> None:
        if "/static/" not in request.url and request.resource_type in ("fetch", "xhr"):
            seen.append(f"{request.method} {request.url}")

    page.on("request", record)
    return seen


FOCUSED = """() => {
  const e = document.activeElement;
  return e === document.body ? "" : e.id || e.textContent.trim();
}"""


def _tab_stops(page: Any) -> list[str]:
    """Where Tab goes, from the first link of the page until focus leaves or comes round."""
    page.locator(".skip-link").focus()
    stops: list[str] = [page.evaluate(FOCUSED)]
    for _ in range(20):
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUSED)
        if not focused or focused in stops:
            break
        stops.append(focused)
    return stops


def test_before_sign_in_only_the_title_and_the_form_show(live: LiveServer, page: Any) -> None:
    page.goto(f"{live.url}/")
    expect(page.get_by_label("User name", exact=True)).to_be_focused()
    assert_signed_out(page)
    # Nothing that needs a token can be reached from the keyboard either.
    assert _tab_stops(page) == [
        "Skip to content",
        "organisation",
        "username",
        "password",
        "Sign in",
    ]
    screenshot(page, "10-signed-out.png")

    # Files dropped on the sign-in page, or on the hidden drop zone, and a question submitted
    # by script: nothing is sent, the page stays where it is and still shows only the form.
    api_calls = _api_requests(page)
    note = ("note.txt", NOTE, "text/plain")
    assert drop_files(page, [note], target="#login-view")  # not opened by the browser either
    drop_files(page, [note])
    page.evaluate("document.getElementById('ask-form').requestSubmit()")
    page.wait_for_timeout(500)
    assert api_calls == []
    assert_signed_out(page)


def _caller(page: Any, live: LiveServer) -> Any:
    """GET /auth/me with the token the page holds: who the page is signed in as."""
    token = page.evaluate(f"sessionStorage.getItem('{TOKEN_KEY}')")
    return httpx.get(f"{live.url}/auth/me", headers={"Authorization": f"Bearer {token}"}).json()


def test_the_organisation_is_asked_once_and_remembered(live: LiveServer, page: Any) -> None:
    try:
        _sign_in_with_the_organisation_once(live, page)
    finally:  # the browser is shared: later tests sign in with no organisation remembered
        page.evaluate("localStorage.clear()")


def _sign_in_with_the_organisation_once(live: LiveServer, page: Any) -> None:
    page.goto(f"{live.url}/")
    organisation = page.get_by_label("Organisation", exact=True)
    expect(organisation).to_be_visible()
    expect(organisation).to_have_value("")
    # A name two organisations have, without one: the right password is told to name it.
    page.get_by_label("User name", exact=True).fill("sam")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text(TENANT_NEEDED)
    expect(organisation).to_be_focused()
    organisation.fill("States-E")  # typed in any case, as people do
    page.get_by_role("button", name="Sign in").click()
    assert_signed_in(page, "sam")
    assert _caller(page, live)["tenant_id"] == "states-e"

    # Signed out, and in a new tab: the organisation is already filled in.
    page.get_by_role("button", name="Sign out").click()
    expect(organisation).to_have_value("states-e")
    again = page.context.new_page()
    try:
        again.goto(f"{live.url}/")
        expect(again.get_by_label("Organisation", exact=True)).to_have_value("states-e")
        again.get_by_label("User name", exact=True).fill("sam")
        again.get_by_label("Password", exact=True).fill(PASSWORD)
        again.get_by_role("button", name="Sign in").click()
        assert_signed_in(again, "sam")
        assert _caller(again, live)["tenant_id"] == "states-e"
    finally:
        again.close()


def test_sign_in_sign_out_and_reload_show_the_right_view(live: LiveServer, page: Any) -> None:
    _sign_in(page, live, "alice")
    expect(page.get_by_text("No documents yet.")).to_be_visible()
    screenshot(page, "11-signed-in.png")

    page.reload()  # the token is kept for this tab
    assert_signed_in(page, "alice")

    page.get_by_label("Question").fill("alice's unsent question")
    page.get_by_role("button", name="Sign out").click()
    assert_signed_out(page, SIGNED_OUT)
    assert page.evaluate(f"sessionStorage.getItem('{TOKEN_KEY}')") is None
    screenshot(page, "12-signed-out-again.png")

    page.reload()
    assert_signed_out(page)

    # The next person in this tab starts clean: nothing typed by the last one.
    _sign_in(page, live, "bruno")
    expect(page.get_by_label("Question")).to_have_value("")


def _forged(token: str, **changes: Any) -> str:
    """The token's own claims with `changes`, signed with the server's real key."""
    claims = jwt.decode(token, options={"verify_signature": False})
    claims.update(changes)
    return jwt.encode(claims, LIVE_JWT_SECRET, algorithm="HS256")


def _tampered(token: str) -> str:
    """The token with one claim changed and its signature kept, as someone editing storage."""
    header, payload, signature = token.split(".")
    claims = jwt.decode(token, options={"verify_signature": False})
    claims["tenant_id"] = "states-b"
    raw = json.dumps(claims, separators=(",", ":")).encode()
    edited = jwt.utils.base64url_encode(raw).decode()
    assert edited != payload
    return f"{header}.{edited}.{signature}"


def test_a_tampered_token_in_storage_never_shows_the_app(live: LiveServer, page: Any) -> None:
    _sign_in(page, live, "alice")
    token = page.evaluate(f"sessionStorage.getItem('{TOKEN_KEY}')")
    page.evaluate(f"t => sessionStorage.setItem('{TOKEN_KEY}', t)", _tampered(token))
    page.add_init_script(WATCH_APP_VIEW)
    with page.expect_response(lambda r: "/documents?" in r.url) as listing:
        page.reload()
    assert listing.value.status == 401
    assert_signed_out(page, SESSION_ENDED)
    assert page.evaluate("window.appViewShown") is False
    assert page.evaluate(f"sessionStorage.getItem('{TOKEN_KEY}')") is None
    screenshot(page, "13-session-ended.png")


def test_a_token_that_expires_while_signed_in_returns_to_the_form(
    live: LiveServer, page: Any
) -> None:
    _sign_in(page, live, "alice")
    token = page.evaluate(f"sessionStorage.getItem('{TOKEN_KEY}')")
    past = datetime.now(UTC) - timedelta(hours=2)
    expired = _forged(token, iat=past, nbf=past, exp=past + timedelta(hours=1))
    page.evaluate(f"t => sessionStorage.setItem('{TOKEN_KEY}', t)", expired)
    page.get_by_label("Question").fill("How often is the brake tested?")
    with page.expect_response(lambda r: "/query/stream" in r.url) as answer:
        page.get_by_role("button", name="Ask", exact=True).click()
    assert answer.value.status == 401
    assert_signed_out(page, SESSION_ENDED)


@pytest.mark.parametrize("action", ["drop a file", "ask"])
def test_a_vanished_token_sends_nothing_and_returns_to_the_form(
    live: LiveServer, page: Any, action: str
) -> None:
    _sign_in(page, live, "alice")
    page.get_by_label("Question").fill("How often is the brake tested?")
    page.evaluate(f"sessionStorage.removeItem('{TOKEN_KEY}')")
    api_calls = _api_requests(page)
    if action == "ask":
        page.get_by_role("button", name="Ask", exact=True).click()
    else:
        drop_files(page, [("note.txt", NOTE, "text/plain")])
    assert_signed_out(page, SESSION_ENDED)
    page.wait_for_timeout(300)
    assert api_calls == []


def test_markup_in_file_names_is_shown_as_text_and_never_runs(live: LiveServer, page: Any) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.add_init_script(WATCH_INJECTION)
    _sign_in(page, live, "bruno")
    page.get_by_label("Choose files").set_input_files(
        files=[
            {"name": RAW_TAG_NAME, "mimeType": "text/plain", "buffer": NOTE},
            {"name": SURVIVING_NAME, "mimeType": "text/plain", "buffer": OTHER_NOTE},
        ]
    )
    uploads = page.get_by_role("list", name="Uploads in progress").get_by_role("listitem")
    expect(uploads).to_have_count(2)
    for row in uploads.all():
        expect(row).to_contain_text("Done", timeout=JOB_TIMEOUT_MS)
    # The upload rows show the names as picked, character for character.
    shown = sorted(row.locator(".name").inner_text() for row in uploads.all())
    assert shown == sorted([RAW_TAG_NAME, SURVIVING_NAME])

    # The list shows the stored names (the server's rules applied) as text, with working
    # buttons named after them.
    rows = page.locator("#documents-body tr")
    expect(rows).to_have_count(2)
    stored_raw = "_img src=x onerror=alert(1)_.txt"
    for name in (stored_raw, SURVIVING_NAME):
        expect(page.get_by_role("cell", name=name, exact=True)).to_be_visible()
        expect(page.get_by_role("button", name=f"Delete {name}", exact=True)).to_be_visible()
    screenshot(page, "14-markup-names.png")

    # Citations and the cited page's title show them as text too.
    page.get_by_label("Question").fill("How often is the KESTREL winch brake tested?")
    page.get_by_role("button", name="Ask", exact=True).click()
    sources = page.get_by_role("list", name="Sources").get_by_role("listitem")
    expect(sources.first).to_be_visible(timeout=120_000)
    cited = [item.locator("bdi").inner_text() for item in sources.all()]
    assert cited and set(cited) <= {stored_raw, SURVIVING_NAME}, cited
    sources.first.get_by_role("button").click()
    viewer = page.get_by_role("dialog")
    expect(viewer.get_by_role("heading")).to_contain_text(cited[0])
    screenshot(page, "15-markup-citation.png")
    viewer.get_by_role("button", name="Close").click()

    # The delete dialog names the file as text as well.
    page.get_by_role("button", name=f"Delete {SURVIVING_NAME}", exact=True).click()
    confirm = page.get_by_role("dialog")
    expect(confirm).to_contain_text(f"“{SURVIVING_NAME}” and its 1 indexed chunk will be removed")
    screenshot(page, "16-markup-confirm.png")
    confirm.get_by_role("button", name="Cancel").click()

    assert page.locator("main img, #confirm img, #viewer-title img").count() == 0
    assert page.evaluate("window.cspViolations") == []
    assert dialogs == []

    # The watch works: markup that does become HTML is reported by it.
    as_html = "html => document.body.insertAdjacentHTML('beforeend', html)"
    page.evaluate(as_html, "<img src=x onerror=alert(9)>")
    page.wait_for_function("window.cspViolations.length > 0")
    assert dialogs == []  # the page's CSP refused the handler


FOLDER = 12


def test_a_folder_of_files_is_watched_through_one_listing_not_a_poll_per_file(
    live: LiveServer, page: Any
) -> None:
    _sign_in(page, live, "carla")
    calls = _api_requests(page)
    page.get_by_label("Choose files").set_input_files(
        files=[
            {
                "name": f"valve-{n:02d}.txt",
                "mimeType": "text/plain",
                "buffer": text_document(f"Valve {n} of the KESTREL is greased every {n} days."),
            }
            for n in range(FOLDER)
        ]
    )
    uploads = page.get_by_role("list", name="Uploads in progress").get_by_role("listitem")
    expect(uploads).to_have_count(FOLDER)
    for row in uploads.all():
        expect(row).to_contain_text("Done: 1 page, 1 chunk", timeout=JOB_TIMEOUT_MS)
    expect(page.locator("#documents-body tr")).to_have_count(FOLDER)
    screenshot(page, "17-folder-uploaded.png")

    paths = [call.split(" ", 1)[1].removeprefix(live.url) for call in calls]
    listings = [path for path in paths if path.startswith("/jobs?")]
    one_by_one = [path for path in paths if path.startswith("/jobs/")]
    # Progress comes from the listing of jobs still to index; a job is fetched on its own
    # once, when it has left that listing, for its outcome (before: every file polled itself).
    assert listings and all("status=queued&status=processing" in path for path in listings)
    assert len(one_by_one) == len(set(one_by_one)) <= FOLDER, one_by_one
    # The documents list is redrawn at most once per round of the watching loop (and once
    # after its last), not once per file accepted and once per file ended; the sign-in's own
    # load may be recorded too.
    assert paths.count("/documents?limit=100") <= len(listings) + 2


EMPTY_REASON = "the .txt file is empty (0 bytes)"


def test_a_failed_document_says_why_in_the_list_after_a_reload_too(
    live: LiveServer, page: Any
) -> None:
    _sign_in(page, live, "dana")
    page.get_by_label("Choose files").set_input_files(
        files=[
            {"name": "empty.txt", "mimeType": "text/plain", "buffer": b""},
            {"name": "winch.txt", "mimeType": "text/plain", "buffer": NOTE},
        ]
    )
    uploads = page.get_by_role("list", name="Uploads in progress").get_by_role("listitem")
    expect(uploads.filter(has_text="empty.txt")).to_contain_text(
        f"Indexing failed: {EMPTY_REASON}", timeout=JOB_TIMEOUT_MS
    )
    expect(uploads.filter(has_text="winch.txt")).to_contain_text("Done", timeout=JOB_TIMEOUT_MS)

    # After a reload the upload rows are gone; the list still says why the file failed, under
    # its name, and nothing under the one that was indexed.
    page.reload()
    assert_signed_in(page, "dana")
    failed = page.locator("#documents-body tr", has_text="empty.txt")
    expect(failed).to_contain_text("failed")
    expect(failed.get_by_role("cell").first).to_have_text(f"empty.txt{EMPTY_REASON}")
    indexed = page.locator("#documents-body tr", has_text="winch.txt")
    expect(indexed.get_by_role("cell").first).to_have_text("winch.txt")
    screenshot(page, "18-failed-reason.png")

    # On a phone the list fits its card: the page itself does not scroll sideways (it did, by
    # 176 px, with the Delete buttons off to the right), and a row's Delete button is in reach.
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    delete = page.get_by_role("button", name="Delete empty.txt", exact=True)
    delete.scroll_into_view_if_needed()
    expect(delete).to_be_in_viewport()
    # A short name keeps its line: the table used to squeeze the name column to a few letters
    # a line ("winc / h.txt"), however narrow the other columns could have been.
    name = page.locator("#documents-body tr", has_text="winch.txt").locator("td.name bdi")
    assert name.evaluate("e => e.getClientRects().length") == 1
    screenshot(page, "19-phone-documents.png")
    page.set_viewport_size({"width": 1280, "height": 900})

    # A reader may not list jobs: the badge shows alone and the page does not ask.
    page.get_by_role("button", name="Sign out").click()
    calls = _api_requests(page)
    page.get_by_label("User name", exact=True).fill("rita")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Signed in as")).to_have_text("Signed in as rita")
    expect(page.get_by_text("Choose files")).to_be_hidden()  # a reader uploads nothing
    failed = page.locator("#documents-body tr", has_text="empty.txt")
    expect(failed).to_contain_text("failed")
    expect(failed.get_by_role("cell").first).to_have_text("empty.txt")
    page.wait_for_load_state("networkidle")  # a request the redraw started would be seen now
    assert not [call for call in calls if "/jobs" in call], calls
