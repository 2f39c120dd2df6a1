"""Page pictures that cannot hold the server hostage: a page beyond the document starts nothing,
a page that failed answers the same 409 at once, images too large are refused undecoded, a busy
renderer answers 429/503 with Retry-After within the bounded wait, and each user is rate limited.
Messages carry no internals."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import app.services.pages as pages_service
from app.rendering.pdf_page import Passage, RenderedPage, RenderLimits
from testkit.builders import corrupt_pdf, heavy_drawing_pdf, huge_image_pdf, pdf_document
from tests.api.harness import ApiFactory, ApiHarness, ApiUser, assert_error_body

pytestmark = pytest.mark.integration

TIMEOUT_S = 4.0  # the heavy page takes PDFium far longer (bench/README.md)
MAX_WAIT_S = 0.5
INTERNALS = ("Pdfium", "Error", "Traceback", "errno", "/tmp", "data format")


@pytest.fixture(scope="module")
def guarded(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(page_render_timeout_s=TIMEOUT_S, page_render_max_wait_s=MAX_WAIT_S)


class Renders:
    """Counts the renders started (each is a child process) and the threads they ran on."""

    def __init__(self) -> None:
        self.threads: list[str] = []
        self._real = pages_service.render_page_isolated

    def __call__(
        self, path: Path, page: int, limits: RenderLimits, passage: Passage | None = None
    ) -> RenderedPage:
        self.threads.append(threading.current_thread().name)
        return self._real(path, page, limits, passage)


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> Iterator[Renders]:
    spy = Renders()
    monkeypatch.setattr(pages_service, "render_page_isolated", spy)
    yield spy


def _upload(api: ApiHarness, user: ApiUser, name: str, content: bytes) -> str:
    job = api.upload_and_wait(user, name, content)
    assert job["status"] == "done", job
    document_id: str = job["document_id"]
    return document_id


def _picture(api: ApiHarness, user: ApiUser, doc: str, page: int) -> tuple[Any, float]:
    started = time.perf_counter()
    response = api.client.get(f"/documents/{doc}/pages/{page}.png", headers=user.headers)
    return response, time.perf_counter() - started


def _no_internals(message: str) -> None:
    assert not any(word.lower() in message.lower() for word in INTERNALS), message


def test_a_page_beyond_the_document_is_refused_without_starting_a_renderer(
    guarded: ApiHarness, renders: Renders
) -> None:
    user = guarded.add_user("guards-range")
    doc = _upload(guarded, user, "two.pdf", pdf_document("Cover of the SKUA log.", "Entries."))
    for page in (3, 999_999):
        response, _ = _picture(guarded, user, doc, page)
        error = assert_error_body(response, 404, "not_found")
        assert error["message"] == f"page {page} does not exist; the document has 2 page(s)"
    assert renders.threads == []  # no child process was started for them
    response, _ = _picture(guarded, user, doc, 2)
    assert response.status_code == 200 and response.headers["content-type"] == "image/png"
    # Drawn on the lane's own threads, never on the threadpool /health and /search share.
    assert [name.split("_")[0] for name in renders.threads] == ["page-render"]


def test_a_page_that_timed_out_answers_the_same_409_at_once(
    guarded: ApiHarness, renders: Renders
) -> None:
    user = guarded.add_user("guards-slow")
    doc = _upload(
        guarded, user, "wiring.pdf", heavy_drawing_pdf("OSPREY wiring.", "The OSPREY diagram.")
    )
    first, first_s = _picture(guarded, user, doc, 2)
    error = assert_error_body(first, 409, "page_unavailable")
    assert error["message"] == (
        f"drawing this PDF page took longer than {TIMEOUT_S:g} s and was stopped; "
        f"GET /documents/{doc}/pages/2/text shows its text"
    )
    assert first_s >= TIMEOUT_S
    again, _ = _picture(guarded, user, doc, 2)
    assert again.status_code == 409 and again.json() == first.json()
    assert len(renders.threads) == 1, "the failed page was rendered again"
    assert _picture(guarded, user, doc, 1)[0].status_code == 200  # its other page is fine
    text = guarded.client.get(f"/documents/{doc}/pages/2/text", headers=user.headers)
    assert text.status_code == 200 and "OSPREY diagram" in text.json()["text"]


def test_a_page_whose_images_would_decode_to_hundreds_of_megabytes_is_refused(
    guarded: ApiHarness,
) -> None:
    user = guarded.add_user("guards-huge")
    doc = _upload(
        guarded, user, "aerial.pdf", huge_image_pdf("Aerial view of the TERN yard.", side_px=12_000)
    )
    response, _ = _picture(guarded, user, doc, 1)
    error = assert_error_body(response, 409, "page_unavailable")
    assert "images of more than 64 megapixels" in error["message"]
    _no_internals(error["message"])


def test_a_damaged_pdf_is_a_409_that_shows_no_exception_text(guarded: ApiHarness) -> None:
    user = guarded.add_user("guards-damaged")
    doc = _upload(guarded, user, "memo.pdf", pdf_document("The PETREL memo."))
    guarded.container.originals.path(tenant_id=user.tenant, document_id=doc).write_bytes(
        corrupt_pdf()
    )
    response, _ = _picture(guarded, user, doc, 1)
    error = assert_error_body(response, 409, "page_unavailable")
    assert error["message"] == (
        "the PDF page could not be drawn; the file may be damaged; "
        f"GET /documents/{doc}/pages/1/text shows its text"
    )


def test_without_a_free_render_slot_the_wait_ends_in_429_or_503_with_retry_after(
    guarded: ApiHarness,
) -> None:
    # Two tenants each hold one of the two slots with a page that runs to the timeout.
    holders = [guarded.add_user(f"guards-hold{n}") for n in (1, 2)]
    heavy = [
        _upload(guarded, u, "plan.pdf", heavy_drawing_pdf("Plan.", f"Deck plan {u.tenant}."))
        for u in holders
    ]
    latecomer = guarded.add_user("guards-late")
    simple = _upload(guarded, latecomer, "card.pdf", pdf_document("The GULL card."))
    own_simple = _upload(guarded, holders[0], "card.pdf", pdf_document("The FULMAR card."))
    results: dict[str, Any] = {}
    lane = guarded.container.page_lane.renders
    # Renders still running when each answer came back: a refusal that waited for a slot to
    # free (instead of giving up after MAX_WAIT_S) would see fewer than two.
    running_at_answer: dict[str, int] = {}

    def ask(name: str, user: ApiUser, doc: str, page: int = 1) -> None:
        results[name] = _picture(guarded, user, doc, page)
        running_at_answer[name] = lane.running

    threads = [
        threading.Thread(target=ask, args=(user.tenant, user, doc, 2))
        for user, doc in zip(holders, heavy, strict=True)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while lane.running < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lane.running == 2
    late = [  # another tenant finds the server busy; the holder finds its own share taken
        threading.Thread(target=ask, args=(name, user, doc))
        for name, user, doc in (("busy", latecomer, simple), ("own", holders[0], own_simple))
    ]
    for thread in late:
        thread.start()
    for thread in [*late, *threads]:
        thread.join()
    (busy, busy_s), (own, own_s) = results.pop("busy"), results.pop("own")
    assert_error_body(busy, 503, "server_busy")
    assert_error_body(own, 429, "concurrency_limited")
    for response, waited in ((busy, busy_s), (own, own_s)):
        assert int(response.headers["Retry-After"]) >= 1
        assert waited >= MAX_WAIT_S  # it did wait for a slot first
    assert running_at_answer["busy"] == running_at_answer["own"] == 2
    assert all(response.status_code == 409 for response, _ in results.values())
    assert _picture(guarded, latecomer, simple, 1)[0].status_code == 200  # slots are free again


def test_each_user_has_a_rate_limit_on_the_page_routes(api_factory: ApiFactory) -> None:
    api = api_factory(rate_limit_pages_per_minute=3)
    user, other = api.add_user("guards-rate"), api.add_user("guards-rate")
    doc = _upload(api, user, "note.pdf", pdf_document("The SHAG note."))
    urls = [f"/documents/{doc}/pages/1.png", f"/documents/{doc}/pages/1/text"]
    assert [api.client.get(urls[n % 2], headers=user.headers).status_code for n in range(3)] == [
        200,
        200,
        200,
    ]
    limited = api.client.get(urls[1], headers=user.headers)
    assert_error_body(limited, 429, "rate_limited")
    assert int(limited.headers["Retry-After"]) >= 1
    # The same tenant's other user has a budget of its own.
    assert api.client.get(urls[0], headers=other.headers).status_code == 200
