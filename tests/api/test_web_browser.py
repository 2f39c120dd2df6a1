"""The web app in a real browser (Debian's headless Chromium via Playwright) against a live
server: sign in, drop files, watch the bars, ask, open the cited page, delete; Arabic; no
request leaves the server's origin; another tenant's page picture is a 404."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser import A11Y_AUDIT, answer_stream_rewritten, drop_files, screenshot

from testkit.builders import pdf_document, text_document
from testkit.live_server import LiveServer
from tests.scans import image_bytes, scanned_page

pytestmark = pytest.mark.integration

PASSWORD = "browser tests password"
MAX_UPLOAD = 2 * 1024 * 1024
JOB_TIMEOUT_MS = 180_000
HANDBOOK_PAGES = (
    "Cover page of the GANNET maintenance handbook, edition 3.",
    "Safety first. The GANNET mast bolts are tightened to 45 newton metres with the blue "
    "torque wrench. Check the bolts again after the first storm of the season.",
)
ARABIC_NOTE = text_document(
    "دليل صيانة محطة الرياح.",
    "يجب فحص شفرات التوربين كل ثلاثة أسابيع بواسطة فريق الصيانة، ويتم تسجيل النتائج في "
    "نظام GANNET.",
)
# Records every text the answer showed, so a test can tell streamed text from a final render.
ANSWER_RECORDER = """() => {
  window.answerSnapshots = [];
  const answer = document.getElementById("answer");
  new MutationObserver(() => window.answerSnapshots.push({
    text: answer.textContent, links: answer.querySelectorAll("a.marker").length,
  })).observe(answer, { childList: true, subtree: true, characterData: true });
}"""
# Paces the real server's event stream one event per 60 ms, so each event lands in its own read
# (on loopback the answer's token and citations events often arrive in one packet): the test can
# then see what the page shows between them. The bytes are the server's, unchanged.
PACE_EVENTS = answer_stream_rewritten("""
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    let buffer = "";
    const paced = new ReadableStream({
      async pull(controller) {
        for (;;) {
          const cut = buffer.indexOf("\\n\\n");
          if (cut >= 0) {
            const block = buffer.slice(0, cut + 2);
            buffer = buffer.slice(cut + 2);
            await new Promise((resolve) => setTimeout(resolve, 60));
            controller.enqueue(encoder.encode(block));
            return;
          }
          const { value, done } = await reader.read();
          if (done) {
            if (buffer) controller.enqueue(encoder.encode(buffer));
            controller.close();
            return;
          }
          buffer += decoder.decode(value, { stream: true });
        }
      },
    });
    return new Response(paced, { status: response.status, headers: response.headers });
""")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("web-live")
    server = LiveServer(
        root / "data",
        {
            "RAG_DOCS_ENABLED": "true",
            "RAG_MAX_UPLOAD_BYTES": str(MAX_UPLOAD),
            # A second upload while one indexes is a 429 (the setting's name before and after
            # the upload-quota work; the other one is ignored).
            "RAG_MAX_JOBS_PER_TENANT": "1",
            "RAG_QUOTA_QUEUED_JOBS": "1",
        },
    )
    for tenant, username in (("web-a", "alice"), ("web-b", "bruno"), ("web-c", "carla")):
        server.create_user(tenant, username, PASSWORD)
    with server.running():
        yield server


@pytest.fixture
def requests_seen(browser: Any) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(request: Any) -> None:
        seen.append(request.url)

    browser.on("request", record)
    yield seen
    browser.remove_listener("request", record)


def _sign_in(page: Any, live: LiveServer, username: str) -> None:
    """Sign in with the keyboard only: type, Tab to the next field, Enter to submit."""
    page.goto(f"{live.url}/")
    page.wait_for_selector("#username:focus")
    page.keyboard.type(username)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "password"
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_selector("#app-view:not([hidden])")


def _upload_row(page: Any, name: str) -> Any:
    return page.locator(f'#uploads li[data-file="{name}"]')


def _wait_outcome(page: Any, name: str) -> str:
    page.wait_for_selector(f'#uploads li[data-file="{name}"][data-outcome]', timeout=JOB_TIMEOUT_MS)
    outcome: str = _upload_row(page, name).get_attribute("data-outcome")
    return outcome


def _ask(page: Any, question: str) -> list[dict[str, Any]]:
    page.evaluate(ANSWER_RECORDER)
    page.fill("#question", question)
    page.click("#ask-button")
    page.wait_for_selector('#answer[data-state="done"]', timeout=120_000)
    snapshots: list[dict[str, Any]] = page.evaluate("window.answerSnapshots")
    return snapshots


# Records every state text an upload row showed, so a test sees the stages a bar went through.
UPLOAD_STATE_RECORDER = """() => {
  window.uploadStates = [];
  new MutationObserver(() => document.querySelectorAll("#uploads .state").forEach(
    (state) => window.uploadStates.push(state.textContent),
  )).observe(document.getElementById("uploads"),
    { childList: true, subtree: true, characterData: true });
}"""
SCANNED_NOTICE = [
    "Notice to the crew of the research vessel KESTREL.",
    "The life rafts are inspected by the harbour master",
    "every March, and the raft code is OSPREY-2290.",
]


def test_a_scanned_image_reads_its_pages_and_opens_highlighted(
    live: LiveServer, browser: Any
) -> None:
    page = browser.new_page()
    _sign_in(page, live, "carla")
    page.evaluate(UPLOAD_STATE_RECORDER)
    drop_files(
        page, [("notice.png", image_bytes([scanned_page(SCANNED_NOTICE)], "PNG"), "image/png")]
    )
    assert _wait_outcome(page, "notice.png") == "done"
    states: list[str] = page.evaluate("window.uploadStates")
    assert any(state.startswith("Reading scanned pages:") for state in states), states
    assert "1 page" in _upload_row(page, "notice.png").inner_text()

    _ask(page, "When are the life rafts of the KESTREL inspected?")
    assert "March" in page.inner_text("#answer")
    page.locator("#answer a.marker").first.click()
    page.wait_for_selector("#viewer-image:not([hidden])", timeout=60_000)
    image = page.locator("#viewer-image")
    assert image.evaluate("img => img.naturalHeight > img.naturalWidth")  # the scanned A4 page
    assert int(image.get_attribute("data-highlight-boxes") or 0) >= 10  # its OCR'd words
    assert "notice.png, page 1" in page.inner_text("#viewer-title")
    screenshot(page, "05-scanned-page.png")
    page.close()


def _assert_same_origin(urls: list[str], origin: str) -> None:
    outside = [u for u in urls if not (u.startswith(origin) or u.startswith(("blob:", "data:")))]
    assert urls and not outside, outside


def test_upload_watch_ask_open_the_cited_page_and_delete(
    live: LiveServer, browser: Any, requests_seen: list[str]
) -> None:
    page = browser.new_page()
    page.add_init_script(PACE_EVENTS)
    _sign_in(page, live, "alice")
    drop_files(
        page,
        [
            ("handbook.pdf", pdf_document(*HANDBOOK_PAGES), "application/pdf"),
            ("tool.exe", b"MZ\x90\x00not a document", "application/octet-stream"),
            ("huge.txt", b"a" * (MAX_UPLOAD + 1024), "text/plain"),
        ],
    )
    assert _wait_outcome(page, "handbook.pdf") == "done"
    bar = _upload_row(page, "handbook.pdf").locator("progress")
    assert bar.evaluate("p => p.value") == 1
    assert "2 pages" in _upload_row(page, "handbook.pdf").inner_text()
    # Refused files say why, in words a person can act on.
    assert _wait_outcome(page, "tool.exe") == "failed"
    assert "not a supported file type" in _upload_row(page, "tool.exe").inner_text()
    assert _wait_outcome(page, "huge.txt") == "failed"
    assert "too large" in _upload_row(page, "huge.txt").inner_text()
    # No bar left moving (or full) beside a refusal.
    assert not _upload_row(page, "tool.exe").locator("progress").is_visible()
    row = page.locator("#documents-body tr", has_text="handbook.pdf")
    cells = row.locator("td").all_inner_texts()
    assert cells[2:5] == ["2", "2", "done"], cells  # pages, chunks, status
    screenshot(page, "01-documents.png")

    snapshots = _ask(page, "What torque are the GANNET mast bolts tightened to?")
    # Streamed: the text was on screen before the citations turned markers into links.
    assert any(s["text"] and s["links"] == 0 for s in snapshots), snapshots
    assert int(page.get_attribute("#answer", "data-tokens") or 0) >= 1
    answer = page.inner_text("#answer")
    assert "45 newton metres" in answer
    assert page.locator("#answer").evaluate("e => e.matches(':dir(ltr)')")
    screenshot(page, "02-answer.png")

    marker = page.locator("#answer a.marker").first
    marker.focus()
    page.keyboard.press("Enter")  # citations open from the keyboard too
    page.wait_for_selector("#viewer-image:not([hidden])", timeout=60_000)
    image = page.locator("#viewer-image")
    assert image.evaluate("img => img.naturalWidth") > 300
    assert int(image.get_attribute("data-highlight-boxes") or 0) >= 1
    assert "page 2" in page.inner_text("#viewer-title")
    path = screenshot(page, "03-cited-page.png")
    page.keyboard.press("Escape")
    page.wait_for_selector("#viewer", state="hidden")
    assert page.evaluate("document.activeElement.classList.contains('marker')")

    row.get_by_role("button", name="Delete handbook.pdf").click()
    page.wait_for_selector("#confirm[open]")
    assert "handbook.pdf" in page.inner_text("#confirm-text")
    page.click("#confirm-delete")
    page.wait_for_selector('#documents-body tr:has-text("handbook.pdf")', state="detached")
    assert "Deleted" in page.inner_text("#documents-status")
    screenshot(page, "04-deleted.png")
    _assert_same_origin(requests_seen, live.url)
    page.close()
    if os.environ.get("RAG_UPDATE_README_SCREENSHOT") == "1":  # refresh the README's picture
        shutil.copyfile(path, Path(__file__).resolve().parents[2] / "docs" / "web-app.png")


def test_arabic_answers_and_pages_are_laid_out_right_to_left(
    live: LiveServer, browser: Any
) -> None:
    page = browser.new_page()
    _sign_in(page, live, "alice")
    page.set_input_files(
        "#file-input",
        files=[{"name": "ملاحظات.txt", "mimeType": "text/plain", "buffer": ARABIC_NOTE}],
    )
    assert _wait_outcome(page, "ملاحظات.txt") == "done"
    _ask(page, "متى يجب فحص شفرات التوربين؟")
    answer = page.locator("#answer")
    assert "ثلاثة أسابيع" in answer.inner_text()
    assert answer.evaluate("e => e.matches(':dir(rtl)')")
    assert page.locator("#question").evaluate("e => e.matches(':dir(rtl)')")
    # Mixed direction: the Arabic file name is isolated inside the English "…, page 1" line.
    assert page.locator("#citations li bdi").first.inner_text() == "ملاحظات.txt"
    page.locator("#citations li button").first.click()
    page.wait_for_selector("#viewer-text:not([hidden]) mark")
    assert "ثلاثة أسابيع" in page.inner_text("#viewer-text mark")
    assert page.locator("#viewer-text").evaluate("e => e.matches(':dir(rtl)')")
    screenshot(page, "05-arabic.png")
    page.close()


def test_an_upload_refused_with_429_waits_and_goes_through(live: LiveServer, browser: Any) -> None:
    page = browser.new_page()
    _sign_in(page, live, "bruno")
    long_text = text_document(
        *(
            f"Paragraph {n} of the OSPREY log: the crane was inspected on day {n}."
            for n in range(3000)
        )
    )
    drop_files(
        page,
        [
            ("osprey-log.txt", long_text, "text/plain"),
            (
                "osprey-note.txt",
                text_document("The OSPREY crane key is in the red box."),
                "text/plain",
            ),
        ],
    )
    # One of the two meets the tenant's job limit, says so, waits Retry-After and retries.
    waiting = page.wait_for_selector('#uploads li .state:has-text("Waiting")', timeout=30_000)
    assert "ingestion jobs" in waiting.inner_text()
    assert _wait_outcome(page, "osprey-log.txt") == "done"
    assert _wait_outcome(page, "osprey-note.txt") == "done"
    page.close()


def test_a_failed_job_says_why(live: LiveServer, browser: Any) -> None:
    page = browser.new_page()
    _sign_in(page, live, "bruno")
    damaged = b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R" + bytes(range(256)) * 8
    drop_files(page, [("damaged.pdf", damaged, "application/pdf")])
    assert _wait_outcome(page, "damaged.pdf") == "failed"
    message = _upload_row(page, "damaged.pdf").inner_text()
    assert "Indexing failed: the PDF is damaged" in message, message
    row = page.locator("#documents-body tr", has_text="damaged.pdf")
    assert row.locator("td").nth(4).inner_text() == "failed"
    page.close()


def test_another_tenants_page_picture_is_a_404_in_the_browser(
    live: LiveServer, browser: Any
) -> None:
    token = httpx.post(
        f"{live.url}/auth/token", data={"username": "alice", "password": PASSWORD}
    ).json()["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    files = {"file": ("secret.pdf", pdf_document("The ALICE-only launch code is 7341."))}
    accepted = httpx.post(f"{live.url}/documents", files=files, headers=headers).json()
    deadline = time.monotonic() + JOB_TIMEOUT_MS / 1000
    while True:
        job = httpx.get(f"{live.url}/jobs/{accepted['job_id']}", headers=headers).json()
        if job["status"] in ("done", "failed") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert job["status"] == "done", job
    own = httpx.get(f"{live.url}/documents/{accepted['document_id']}/pages/1.png", headers=headers)
    assert own.status_code == 200 and own.headers["content-type"] == "image/png"

    page = browser.new_page()
    _sign_in(page, live, "bruno")
    fetch = """async (path) => {
      const token = sessionStorage.getItem("rag.token");
      const r = await fetch(path, { headers: { Authorization: `Bearer ${token}` } });
      return { status: r.status, body: await r.text() };
    }"""
    theirs = page.evaluate(fetch, f"/documents/{accepted['document_id']}/pages/1.png")
    missing = page.evaluate(fetch, "/documents/doc_000000000000000000000000/pages/1.png")
    assert theirs["status"] == 404
    assert theirs == missing
    page.close()


def test_the_app_and_the_docs_load_nothing_from_outside(
    live: LiveServer, browser: Any, requests_seen: list[str]
) -> None:
    page = browser.new_page()
    _sign_in(page, live, "bruno")
    page.wait_for_load_state("networkidle")
    # Visible focus: the focused control draws an outline.
    page.keyboard.press("Tab")
    style = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert style not in ("none", ""), style
    page.goto(f"{live.url}/docs")
    page.wait_for_selector(".swagger-ui .info .title", timeout=60_000)
    assert "RAG service" in page.inner_text(".swagger-ui .info .title")
    page.goto(f"{live.url}/redoc")
    page.wait_for_selector("h1:has-text('RAG service')", timeout=60_000)
    page.wait_for_load_state("networkidle")
    screenshot(page, "06-redoc.png")
    _assert_same_origin(requests_seen, live.url)
    assert any(u.endswith("/docs-assets/swagger-ui-bundle.js") for u in requests_seen)
    assert any(u.endswith("/docs-offline/redoc.standalone.js") for u in requests_seen)
    page.close()


# CRLF and LF line ends, a comment line, and a two-byte Arabic letter that a split can cut.
SSE_BODY = (
    ': keep-alive\r\n\r\nevent: token\r\ndata: {"text": "مرحبا [1]"}\r\n\r\n'
    'event: token\ndata: {"text": " world"}\n\nevent: done\ndata: {"total_ms": 3}\n\n'
)
SSE_SPLIT_EVERYWHERE = """async (text) => {
  const { readEvents } = await import("/static/js/sse.js");
  const bytes = new TextEncoder().encode(text);
  const results = [];
  for (const size of [1, 2, 3, 7, bytes.length]) {  // every split point, mid-character too
    let at = 0;
    const body = new ReadableStream({
      pull(controller) {
        if (at >= bytes.length) { controller.close(); return; }
        controller.enqueue(bytes.slice(at, at + size));
        at += size;
      },
    });
    const events = [];
    await readEvents(new Response(body), (name, data) => events.push([name, data]));
    results.push(events);
  }
  return results;
}"""
RENDER_MARKERS = """async () => {
  const { renderAnswer } = await import("/static/js/ask.js");
  const box = document.createElement("div");
  const cite = (marker) => ({ marker, source: "a.pdf", page: 1, page_label: "1",
    document_id: "doc_x", chunk_id: "", snippet: "" });
  renderAnswer(box, "Bolts [1, 3]. Nuts [2]. <b>bold</b>", [cite(1), cite(2)]);
  return {
    text: box.textContent,
    links: [...box.querySelectorAll("a.marker")].map((a) => a.dataset.marker),
    html: box.querySelectorAll("b").length,
  };
}"""


def test_the_event_parser_and_marker_links_in_the_browser(live: LiveServer, browser: Any) -> None:
    page = browser.new_page()
    page.goto(f"{live.url}/")
    results = page.evaluate(SSE_SPLIT_EVERYWHERE, SSE_BODY)
    expected = [
        ["token", {"text": "مرحبا [1]"}],
        ["token", {"text": " world"}],
        ["done", {"total_ms": 3}],
    ]
    assert all(events == expected for events in results), results
    rendered = page.evaluate(RENDER_MARKERS)
    # [3] has no citation (an invented marker) and stays text; server text is never HTML.
    assert rendered["links"] == ["1", "2"]
    assert rendered["text"] == "Bolts [1] [3]. Nuts [2]. <b>bold</b>"
    assert rendered["html"] == 0
    page.close()


FOCUSED = """() => {
  const e = document.activeElement;
  const id = e.id || e.getAttribute("aria-label") || e.textContent.trim().slice(0, 30);
  return { tag: e.tagName, id, outline: getComputedStyle(e).outlineStyle };
}"""


def test_labels_keyboard_focus_and_contrast(live: LiveServer, browser: Any) -> None:
    page = browser.new_page()
    page.goto(f"{live.url}/")
    page.wait_for_selector("#username:focus")
    login = page.evaluate(A11Y_AUDIT)
    assert login == {"unnamed": [], "low": []}, login
    _sign_in(page, live, "bruno")
    page.wait_for_load_state("networkidle")
    signed_in = page.evaluate(A11Y_AUDIT)
    assert signed_in == {"unnamed": [], "low": []}, signed_in
    # Tab, from the skip link on, reaches every control, each with a visible focus outline.
    page.focus(".skip-link")
    reached = []
    for _ in range(30):
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUSED)
        if focused["tag"] == "BODY":
            break
        assert focused["outline"] not in ("none", ""), focused
        reached.append(focused["id"])
    for control in ("sign-out", "file-input", "question", "ask-button"):
        assert control in reached, reached
    page.close()


def test_sign_out_revokes_the_token_on_the_server(live: LiveServer, browser: Any) -> None:
    page = browser.new_page()
    _sign_in(page, live, "bruno")
    copied = page.evaluate("sessionStorage.getItem('rag.token')")
    headers = {"Authorization": f"Bearer {copied}"}
    assert httpx.get(f"{live.url}/auth/me", headers=headers).status_code == 200
    with page.expect_response(lambda r: r.url.endswith("/auth/logout")) as logout:
        page.click("#sign-out")
    assert logout.value.status == 204
    page.wait_for_selector("#login-view:not([hidden])")
    # A copy of the token (another tab, a leaked log line) no longer works either.
    assert httpx.get(f"{live.url}/auth/me", headers=headers).status_code == 401
    page.close()
