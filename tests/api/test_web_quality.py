"""Answer quality in the web app, as people see it in Chromium, by visible labels and roles.

A reader rates an answer down and names the page it should have used; a member tests retrieval
and sees each passage's signals as bars; the admin finds a rating in Feedback, turns it into a
test set, runs it twice, reads the chart (its points are the API's numbers) and opens the missed
question in the test bench. Signed out, and as a reader, none of the Quality section shows.

Each test stands alone: the module's tenant holds only what no test changes (three people and two
documents); a test makes through the API what it reads (its own user, rating, set or runs), and
a test that checks every rating of the tenant (a set made from them all, the export) gets a
tenant of its own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser import (
    A11Y_AUDIT,
    PAST_THE_EDGES,
    PHONE,
    SMALLEST_PHONE,
    artifacts_dir,
    launched_chromium,
    screenshot,
)
from playwright.sync_api import expect
from sqlalchemy import create_engine, delete, select
from sqlalchemy.orm import Session

from app.storage.tables import AnswerFeedbackRow, DocumentRow, EvaluationRunRow, EvaluationSetRow
from testkit.builders import pdf_document, text_document
from testkit.live_server import LiveServer
from tests.api.browser import sign_in_with_form

pytestmark = pytest.mark.integration

TENANT = "web-quality"
PASSWORD = "web quality password"
JOB_TIMEOUT_S = 180.0
TOPICS = [
    "Pump P-100: replace the impeller seal every 2000 hours and check the shaft bearing.",
    "Boiler B-7: purge the furnace for five minutes before ignition, then open the feed valve.",
    "Crane C-3: test the brake under load and grease the slewing ring every month.",
    "Generator G-2: run it unloaded for ten minutes each Friday and log the voltage.",
    "Ballast pumps: flush the strainers after every voyage through silty water.",
    "Fire doors: check that every door closes on its own and the seals are intact.",
    "Liferafts: send them for service every twelve months to an approved station.",
    "Canteen hours: breakfast from seven, lunch from noon, the canteen is closed on Sundays.",
]
QUESTION = "How often is the pump impeller seal replaced?"
MINUTES = "Board minutes: the canteen closes for renovation in March; the budget is approved."
# A file name in one piece (underscores) and a word longer than a small phone's line.
UNBROKEN_NAME = "north_sea_wind_farm_quarterly_maintenance_report_2026.txt"
LONG_WORD = "Betriebsanleitungsaktualisierungsprotokoll"


@dataclass
class Person:
    """Someone of a tenant on the live server, calling its API with one token."""

    live: LiveServer
    username: str
    tenant: str = TENANT

    @cached_property
    def headers(self) -> dict[str, str]:
        """The bearer header of this person's token (signed in on first use)."""
        response = httpx.post(
            f"{self.live.url}/auth/token",
            data={"username": self.username, "password": PASSWORD, "tenant": self.tenant},
        )
        assert response.status_code == 200, response.text
        return {"Authorization": f"Bearer {response.json()['access_token']}"}

    @cached_property
    def user_id(self) -> str:
        """This person's user id."""
        return str(self.api("GET", "/auth/me")["user_id"])

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON body of a successful call to `path`."""
        response = httpx.request(
            method, f"{self.live.url}{path}", headers=self.headers, timeout=60, **kwargs
        )
        assert response.status_code < 300, response.text
        return response.json()

    def add_user(self, username: str, role: str) -> Person:
        """A new user of this admin's tenant, named for the one test that uses it."""
        self.api("POST", "/users", json={"username": username, "password": PASSWORD, "role": role})
        return Person(self.live, username, self.tenant)

    def upload(self, name: str, content: bytes, collection: str = "") -> None:
        """Upload a document and wait until it is indexed."""
        data = {"collection": collection} if collection else {}
        accepted = self.api("POST", "/documents", files={"file": (name, content)}, data=data)
        deadline = time.monotonic() + JOB_TIMEOUT_S
        job = {"status": "queued"}
        while job["status"] not in ("done", "failed"):
            assert time.monotonic() < deadline, job
            job = self.api("GET", f"/jobs/{accepted['job_id']}", params={"wait": 30})
        assert job["status"] == "done", job

    def rate_down(self, comment: str) -> dict[str, Any]:
        """Ask QUESTION and rate the answer down naming page 8 of manual.pdf (the canteen: a
        miss by design); the rating."""
        answer = self.api("POST", "/query", json={"question": QUESTION})
        expected = [{"source": "manual.pdf", "page": 8}]
        rating = {"rating": "down", "comment": comment, "expected": expected}
        rated: dict[str, Any] = self.api(
            "POST", f"/answers/{answer['answer_id']}/feedback", json=rating
        )
        return rated

    def run(self, set_id: str) -> None:
        """Run a test set and wait until the run is done."""
        run = self.api("POST", "/evaluations/runs", json={"set_id": set_id})
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while run["status"] not in ("done", "failed"):
            assert time.monotonic() < deadline, run
            time.sleep(0.2)
            run = self.api("GET", f"/evaluations/runs/{run['run_id']}")
        assert run["status"] == "done", run


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The server, and the module's tenant as no test changes it: ada (admin), max (member),
    rex (reader), manual.pdf for all of them and minutes.txt in the admin's restricted "board"
    (the admin's test bench offers it, the member's does not)."""
    server = LiveServer(
        tmp_path_factory.mktemp("web-quality") / "data", {"RAG_RATE_LIMIT_AUTH_PER_MINUTE": "200"}
    )
    server.create_user(TENANT, "ada", PASSWORD)  # the tenant's admin
    server.create_user(TENANT, "max", PASSWORD, role="member")
    server.create_user(TENANT, "rex", PASSWORD, role="reader")
    with server.running():
        ada = Person(server, "ada")
        ada.upload("manual.pdf", pdf_document(*TOPICS))
        ada.api("POST", "/collections", json={"name": "board", "visibility": "restricted"})
        ada.upload("minutes.txt", text_document(MINUTES), collection="board")
        yield server


def tenant_of_its_own(live: LiveServer, tenant: str) -> Person:
    """The admin of a new tenant that holds manual.pdf alone: for a test that checks every
    rating of the tenant, so that no other test's rating counts."""
    live.create_user(tenant, "ada", PASSWORD)
    admin = Person(live, "ada", tenant)
    admin.upload("manual.pdf", pdf_document(*TOPICS))
    return admin


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium that keeps what the page saves (the exports are read back)."""
    with launched_chromium(downloads=True) as context:
        yield context


def sign_in(browser: Any, person: Person) -> Any:
    """A new tab signed in as `person` through the form, organisation typed."""
    page = browser.new_page()
    sign_in_with_form(page, person.live.url, person.username, PASSWORD, person.tenant)
    return page


def test_signed_out_nothing_of_quality_shows(live: LiveServer, browser: Any) -> None:
    page = browser.new_page()
    page.goto(f"{live.url}/")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    for name in ("Quality", "Test retrieval", "Evaluation", "Feedback"):
        assert page.get_by_text(name, exact=True).filter(visible=True).count() == 0, name
    assert page.get_by_role("button", name="Helpful").filter(visible=True).count() == 0
    page.close()


def test_a_reader_rates_an_answer_down_and_names_the_page(live: LiveServer, browser: Any) -> None:
    ada = Person(live, "ada")
    reader = ada.add_user("rex-rates-down", "reader")
    page = sign_in(browser, reader)
    assert page.get_by_role("link", name="Quality").filter(visible=True).count() == 0
    expect(page.get_by_role("group", name="Was this answer helpful?")).to_be_hidden()
    page.get_by_label("Question", exact=True).fill(QUESTION)
    page.get_by_role("button", name="Ask", exact=True).click()
    helpful = page.get_by_role("group", name="Was this answer helpful?")
    expect(helpful).to_be_visible(timeout=60_000)
    page.get_by_role("button", name="Not helpful").click()
    expect(page.get_by_role("button", name="Not helpful")).to_have_attribute("aria-pressed", "true")
    expect(page.get_by_role("button", name="Helpful", exact=True)).to_have_attribute(
        "aria-pressed", "false"
    )
    picker = page.get_by_role("group", name="Which document and page should it have used?")
    expect(picker).to_be_visible()
    page.get_by_label("Document it should have used").select_option(label="manual.pdf")
    page.get_by_label("Page", exact=True).fill("8")  # the canteen page: a miss by design
    page.get_by_label("Comment").fill("Wrong page for the seal")
    page.get_by_role("button", name="Send details").click()
    expect(page.get_by_role("status").filter(has_text="your details were saved")).to_be_visible()
    screenshot(page, "quality-reader-feedback.png")
    audit = page.evaluate(A11Y_AUDIT)
    assert audit["unnamed"] == [] and audit["low"] == [], audit
    page.close()
    feedback = ada.api("GET", "/feedback", params={"rating": "down", "user_id": reader.user_id})
    assert feedback["count"] == 1
    entry = feedback["data"][0]
    assert (entry["question"], entry["comment"]) == (QUESTION, "Wrong page for the seal")
    assert [(e["source"], e["page"]) for e in entry["expected"]] == [("manual.pdf", 8)]


def test_a_member_tests_retrieval_and_sees_the_signals(live: LiveServer, browser: Any) -> None:
    member = Person(live, "max")
    page = sign_in(browser, member)
    page.get_by_role("link", name="Quality").click()
    expect(page.get_by_role("heading", name="Test retrieval")).to_be_focused()
    assert page.get_by_role("heading", name="Feedback").filter(visible=True).count() == 0
    expect(page.get_by_role("button", name="Make a set from feedback")).to_be_hidden()
    page.get_by_label("Text to search for").fill("When is the canteen closed?")
    page.get_by_role("button", name="Test retrieval").click()
    results = page.get_by_role("list", name="Ranked passages").get_by_role("listitem")
    expect(results.first).to_be_visible()
    expected = member.api(
        "POST", "/search", json={"query": "When is the canteen closed?", "k": 10, "explain": True}
    )
    first = expected["results"][0]["explain"]
    meter = results.first.get_by_role("meter", name="Keyword match")
    expect(meter).to_have_attribute("value", str(first["keyword_score"]))
    expect(results.first).to_contain_text("Matched words:")
    expect(results.first.locator("mark", has_text="canteen")).to_be_visible()
    results.first.get_by_role("button", name="Open page 8").click()
    expect(page.get_by_role("dialog")).to_be_visible()
    expect(page.get_by_role("img", name="Page 8 of manual.pdf")).to_be_visible(timeout=30_000)
    page.get_by_role("button", name="Close").click()
    # On a phone the signals' words wrap and their meters narrow: they ran 10 px past the card.
    page.set_viewport_size(PHONE)
    assert page.evaluate(PAST_THE_EDGES) == []
    screenshot(page, "bench-phone.png")
    page.close()


def test_the_bench_fits_the_smallest_phone(live: LiveServer, browser: Any) -> None:
    # A passage ran past a 320 px screen: its unbroken file name, a long word, and the matched
    # words, run together without a space into one word too long for the line.
    admin = Person(live, "ada", "web-quality-smallest-phone")
    live.create_user(admin.tenant, admin.username, PASSWORD)
    text = f"The {LONG_WORD} says when the pump impeller seal and shaft bearing were checked."
    admin.upload(UNBROKEN_NAME, text_document(text))
    question = f"{LONG_WORD}: pump impeller seal, shaft bearing checked"
    page = sign_in(browser, admin)
    page.set_viewport_size(SMALLEST_PHONE)
    page.get_by_role("link", name="Quality").click()
    page.get_by_label("Text to search for").fill(question)
    page.get_by_role("button", name="Test retrieval").click()
    expect(passages(page).first).to_contain_text(UNBROKEN_NAME)
    assert page.evaluate(PAST_THE_EDGES) == []
    # The matched words read as words, and a line wraps between them, not inside a short one.
    found = admin.api("POST", "/search", json={"query": question, "k": 10, "explain": True})
    words = found["results"][0]["explain"]["matched_terms"]
    assert len(words) >= 5, words
    terms = passages(page).first.locator(".terms")
    expect(terms).to_have_text("Matched words: " + " ".join(words))
    cut = terms.locator("mark").evaluate_all(
        "(marks) => marks.filter((m) => m.getClientRects().length > 1).map((m) => m.textContent)"
    )
    assert cut in ([], [LONG_WORD.lower()]), cut
    screenshot(page, "bench-smallest-phone.png")
    # Where there is room, the name keeps one line.
    page.set_viewport_size({"width": 1280, "height": 900})
    name = passages(page).first.locator("strong")
    assert name.evaluate("(e) => e.getClientRects().length") == 1
    page.close()


def test_the_admin_turns_feedback_into_a_set_runs_it_and_reads_the_chart(
    live: LiveServer, browser: Any
) -> None:
    admin = tenant_of_its_own(live, "web-quality-feedback-set")
    admin.rate_down("Wrong page for the seal")
    page = sign_in(browser, admin)
    page.get_by_role("link", name="Quality").click()
    rows = page.get_by_role("table", name="Ratings of answers, newest first").get_by_role("row")
    expect(rows.filter(has_text=QUESTION)).to_contain_text("not helpful")
    page.get_by_role("button", name="Make a set from feedback").click()
    expect(page.get_by_role("status").filter(has_text="made with 1 question")).to_be_visible()
    for run in (1, 2):
        page.get_by_role("button", name="Run evaluation").click()
        # The run's row says done once the page has polled it to its end (and redrawn the chart).
        runs_table = page.get_by_role("table", name="Runs of this set")
        expect(runs_table.get_by_role("row")).to_have_count(run + 1)
        expect(runs_table.get_by_role("row").nth(run)).to_contain_text("done", timeout=60_000)
        expect(page.locator("#eval-chart circle")).to_have_count(run)
    chart = page.get_by_role("img", name="Page MRR@10")
    expect(chart).to_be_visible()
    set_id = page.get_by_label("Test set", exact=True).input_value()
    runs = admin.api("GET", "/evaluations/runs", params={"set_id": set_id})["data"]
    shown = [
        float(v)
        for v in chart.locator("circle").evaluate_all("(dots) => dots.map((d) => d.dataset.value)")
    ]
    assert shown == pytest.approx([r["summary"]["page_mrr@10"] for r in runs])
    page.get_by_label("Metric to chart").select_option(label="Document hit@1")
    hit = page.get_by_role("img", name="Document hit@1")
    shown = [
        float(v)
        for v in hit.locator("circle").evaluate_all("(dots) => dots.map((d) => d.dataset.value)")
    ]
    assert shown == pytest.approx([r["summary"]["document_hit@1"] for r in runs])
    page.get_by_label("Metric to chart").select_option(label="Page MRR@10")
    page.locator("#eval-chart-figure").scroll_into_view_if_needed()
    chart_picture = artifacts_dir() / "evaluation-chart.png"
    page.locator("#eval-chart-figure").screenshot(path=str(chart_picture))
    screenshot(page, "evaluation-view.png")

    page.get_by_role("button", name="Show misses").last.click()
    misses = page.get_by_role("region", name="Misses of this run")
    expect(misses).to_contain_text(QUESTION)
    expect(misses).to_contain_text("0 questions worse, 0 better")
    misses.get_by_role("button", name="Open in test bench").click()
    expect(page.get_by_label("Text to search for")).to_have_value(QUESTION)
    expect(
        page.get_by_role("list", name="Ranked passages").get_by_role("listitem").first
    ).to_be_visible()
    audit = page.evaluate(A11Y_AUDIT)
    assert audit["unnamed"] == [] and audit["low"] == [], audit
    # On a phone the chart takes the card's width and the metric picker keeps inside it (a
    # figure's indent pushed the picker, as wide as its longest choice, past the card's edge).
    for size in (PHONE, SMALLEST_PHONE):  # a common phone, and the narrowest still in use
        page.set_viewport_size(size)
        assert page.evaluate(PAST_THE_EDGES) == []
        # Redrawn for the phone: its text as large on screen as at full width (it shrank with the
        # drawing to about 5 px), and the dates under the axis do not run into each other.
        expect(page.locator("#eval-chart svg")).to_have_count(1)
        labels = page.locator("#eval-chart svg text").evaluate_all(
            """(texts) => texts.map((t) => {
                const box = t.getBoundingClientRect();
                return {text: t.textContent, height: box.height, left: box.left, right: box.right,
                        top: box.top};
            })"""
        )
        assert labels and min(label["height"] for label in labels) >= 10, labels
        drawing = page.locator("#eval-chart svg").bounding_box()
        assert drawing is not None
        inside = (drawing["x"] - 0.5, drawing["x"] + drawing["width"] + 0.5)
        assert all(inside[0] <= lab["left"] and lab["right"] <= inside[1] for lab in labels), labels
        under_axis = sorted(
            (label for label in labels if label["top"] == max(lab["top"] for lab in labels)),
            key=lambda label: label["left"],
        )
        assert all(a["right"] <= b["left"] for a, b in pairwise(under_axis)), under_axis
    screenshot(page, "evaluation-view-phone.png")
    page.locator("#eval-chart-figure").screenshot(path=str(artifacts_dir() / "chart-phone.png"))
    page.close()


def passages(page: Any) -> Any:
    return page.get_by_role("list", name="Ranked passages").get_by_role("listitem")


def test_the_bench_searches_the_chosen_document_and_pages(live: LiveServer, browser: Any) -> None:
    member = Person(live, "max")
    page = sign_in(browser, member)
    page.get_by_role("link", name="Quality").click()
    # The member reads one collection: no collection to choose, and only its documents.
    expect(page.get_by_label("Only in the document")).to_be_visible()
    expect(page.get_by_label("Collection to search")).to_be_hidden()
    documents = page.get_by_label("Only in the document").locator("option")
    expect(documents).to_have_text(["Any document", "manual.pdf"])
    page.get_by_label("Text to search for").fill("When is the canteen closed?")
    page.get_by_label("Only in the document").select_option(label="manual.pdf")
    page.get_by_label("From page").fill("2")
    page.get_by_label("To page").fill("3")
    page.get_by_role("button", name="Test retrieval").click()
    expect(passages(page).first).to_be_visible()
    shown = passages(page).evaluate_all("(items) => items.map((i) => i.textContent)")
    assert shown and all(", page 2 " in t or ", page 3 " in t for t in shown), shown
    expected = member.api(
        "POST",
        "/search",
        json={
            "query": "When is the canteen closed?",
            "k": 10,
            "filters": {"$and": [{"page": {"$gte": 2}}, {"page": {"$lte": 3}}]},
        },
    )
    assert len(shown) == len(expected["results"])
    page.close()


def test_the_admin_chooses_a_collection_in_the_bench(live: LiveServer, browser: Any) -> None:
    page = sign_in(browser, Person(live, "ada"))
    page.get_by_role("link", name="Quality").click()
    picker = page.get_by_label("Collection to search")
    expect(picker).to_be_visible()
    expect(picker.locator("option", has_text="board")).to_have_count(1)
    picker.select_option(label="board (1)")
    documents = page.get_by_label("Only in the document").locator("option")
    expect(documents).to_have_text(["Any document", "minutes.txt"])
    page.get_by_label("Text to search for").fill("When is the canteen closed?")
    page.get_by_role("button", name="Test retrieval").click()
    expect(passages(page).first).to_be_visible()
    sources = passages(page).locator("strong").all_text_contents()
    assert sources and set(sources) == {"minutes.txt"}, sources
    picker.select_option(label="Every collection I can read")
    page.get_by_role("button", name="Test retrieval").click()
    expect(passages(page).locator("strong", has_text="manual.pdf").first).to_be_visible()
    page.close()


def test_a_filter_in_the_bench_leaves_out_the_documents_it_does_not_match(
    live: LiveServer, browser: Any
) -> None:
    page = sign_in(browser, Person(live, "ada"))
    sent: list[Any] = []
    page.on(
        "request", lambda r: sent.append(r.post_data_json) if r.url.endswith("/search") else None
    )
    page.get_by_role("link", name="Quality").click()
    page.get_by_label("Text to search for").fill("When is the canteen closed?")
    page.get_by_role("button", name="Test retrieval").click()
    expect(passages(page).locator("strong", has_text="minutes.txt").first).to_be_visible()

    bench = page.get_by_role("region", name="Test retrieval")
    bench.get_by_role("button", name="Add a retrieval filter").click()
    bench.get_by_label("Field of retrieval filter 1").fill("source")
    page.get_by_role("button", name="Test retrieval").click()
    expect(page.get_by_role("status").filter(has_text="Filter 1")).to_have_text(
        "Filter 1: enter a value."
    )
    searches = len(sent)  # nothing was sent for the unfinished filter
    bench.get_by_label("Value of retrieval filter 1").fill("manual.pdf")
    page.get_by_role("button", name="Test retrieval").click()
    expect(page.get_by_role("status").filter(has_text="passages in")).to_be_visible()
    assert len(sent) == searches + 1
    assert sent[-1]["filters"] == {"source": {"$eq": "manual.pdf"}}
    sources = passages(page).locator("strong").all_text_contents()
    assert sources and set(sources) == {"manual.pdf"}, sources
    # The Ask form's filters are its own: none was added there.
    expect(page.get_by_label("Field of filter 1")).to_have_count(0)
    assert page.evaluate(A11Y_AUDIT) == {"unnamed": [], "low": []}
    screenshot(page, "quality-bench-filter.png")
    page.close()


def test_the_admin_opens_the_record_of_a_rated_answer(live: LiveServer, browser: Any) -> None:
    ada = Person(live, "ada")
    comment = "Page 8 is the canteen, not the seal"
    rated = ada.add_user("rex-record", "reader").rate_down(comment)
    record = ada.api("GET", f"/answers/{rated['answer_id']}")
    page = sign_in(browser, ada)
    page.get_by_role("link", name="Quality").click()
    rows = page.get_by_role("table", name="Ratings of answers, newest first").get_by_role("row")
    rows.filter(has_text=comment).get_by_role("button", name="Open answer record").click()
    shown = page.get_by_role("region", name="Answer record")
    expect(page.get_by_role("heading", name="Answer record")).to_be_focused()
    expect(shown).to_contain_text(f"Question{QUESTION}")
    expect(shown).to_contain_text("Not helpful: should have used manual.pdf p. 8")
    expect(shown).to_contain_text(comment)
    expect(shown).to_contain_text(f"Model{record['model']}")
    ranked = shown.get_by_role("table", name="Passages retrieved, by rank").get_by_role("row")
    expect(ranked).to_have_count(len(record["retrieved"]) + 1)
    cells = ranked.nth(1).get_by_role("cell")
    first = record["retrieved"][0]
    expect(cells).to_have_text([str(first["rank"]), first["source"], str(first["page"])])
    cited = shown.get_by_role("list", name="Pages cited").get_by_role("listitem")
    assert record["cited"], record  # the seal question is answered from the manual
    expect(cited).to_have_count(len(record["cited"]))
    citation = record["cited"][0]
    cited.first.get_by_role("button").click()
    expect(page.get_by_role("dialog")).to_be_visible()
    expect(
        page.get_by_role("img", name=f"Page {citation['page']} of {citation['source']}")
    ).to_be_visible(timeout=30_000)
    page.get_by_role("button", name="Close").click()
    screenshot(page, "quality-answer-record.png")
    audit = page.evaluate(A11Y_AUDIT)
    assert audit["unnamed"] == [] and audit["low"] == [], audit
    page.close()

    # A member has no feedback list, so no answer record of anyone else's.
    member = sign_in(browser, Person(live, "max"))
    member.get_by_role("link", name="Quality").click()
    expect(member.get_by_role("heading", name="Test retrieval")).to_be_focused()
    assert member.get_by_role("button", name="Open answer record").count() == 0
    assert member.get_by_role("region", name="Answer record").filter(visible=True).count() == 0
    member.close()


def saved_lines(page: Any, button: str) -> list[dict[str, Any]]:
    """Click the export button named `button` and read back the JSON lines the page saved."""
    with page.expect_download() as saving:
        page.get_by_role("button", name=button).click()
    path = saving.value.path()
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_a_member_uploads_test_set_files_and_runs_one_with_answers(
    live: LiveServer, browser: Any, tmp_path: Path
) -> None:
    reader = sign_in(browser, Person(live, "rex"))
    assert reader.get_by_role("link", name="Quality").filter(visible=True).count() == 0
    assert reader.get_by_label("Test set file (JSONL or CSV)").filter(visible=True).count() == 0
    reader.close()
    items = [
        {"question": QUESTION, "expected": [{"source": "manual.pdf", "page": 1}]},
        {"question": "What is the airspeed of an unladen swallow?", "answerable": False},
    ]
    jsonl = tmp_path / "seal.jsonl"
    jsonl.write_text("".join(json.dumps(item) + "\n" for item in items))
    csv = tmp_path / "crane.csv"
    csv.write_text(
        "question,source,page,answerable\nWhat is tested on the crane?,manual.pdf,3,true\n"
    )
    member = Person(live, "max")
    page = sign_in(browser, member)
    page.get_by_role("link", name="Quality").click()
    for path, name, count in ((csv, "crane", 1), (jsonl, "seal", 2)):
        page.get_by_label("Name of the uploaded set").fill(name)
        page.get_by_label("Test set file (JSONL or CSV)").set_input_files(str(path))
        page.get_by_role("button", name="Upload set").click()
        expect(page.get_by_role("status").filter(has_text=f"“{name}” uploaded")).to_contain_text(
            f"{count} question"
        )
        expect(page.get_by_label("Test set", exact=True).locator("option:checked")).to_have_text(
            f"{name} ({count} question{'s' if count > 1 else ''})"
        )
    page.get_by_label("Also let the model answer (slower)").check()
    page.get_by_role("button", name="Run evaluation").click()
    runs_table = page.get_by_role("table", name="Runs of this set")
    expect(runs_table.get_by_role("row").nth(1)).to_contain_text("done", timeout=120_000)
    # The member sees neither the feedback nor the answer records' export and delete.
    for name in ("Export as JSONL", "Export answer records", "Delete answer records"):
        assert page.get_by_role("button", name=name).filter(visible=True).count() == 0, name
    set_id = page.get_by_label("Test set", exact=True).input_value()
    page.close()
    (run,) = member.api("GET", "/evaluations/runs", params={"set_id": set_id})["data"]
    assert run["answers"] is True
    results = member.api("GET", f"/evaluations/runs/{run['run_id']}")["results"]
    assert [r["question"] for r in results] == [item["question"] for item in items]
    assert all("answer" in r for r in results), results  # the model answered every item
    assert results[1]["answer"]["refused"] is True
    assert run["summary"]["refused_unanswerable"] == 1.0


def test_the_admin_exports_feedback_as_jsonl(live: LiveServer, browser: Any) -> None:
    admin = tenant_of_its_own(live, "web-quality-feedback-export")
    admin.rate_down("Wrong page for the seal")
    page = sign_in(browser, admin)
    page.get_by_role("link", name="Quality").click()
    rows = page.get_by_role("table", name="Ratings of answers, newest first").get_by_role("row")
    expect(rows.filter(has_text=QUESTION)).to_be_visible()
    saved = saved_lines(page, "Export as JSONL")
    listed = admin.api("GET", "/feedback")["data"]
    assert [line["answer_id"] for line in saved] == [entry["answer_id"] for entry in listed]
    assert saved[0]["question"] == QUESTION and saved[0]["rating"] == "down"
    page.get_by_label("Rating", exact=True).select_option(label="Helpful")
    expect(page.get_by_role("status").filter(has_text="No feedback yet.")).to_be_visible()
    assert saved_lines(page, "Export as JSONL") == []
    page.close()


def _copies(live: LiveServer, row: Any, where: Any, changes: list[dict[str, Any]]) -> None:
    """Add copies of the one row `where` selects, each with its `changes` (test setup straight
    in the server's database, where the API would take minutes to make as many)."""
    engine = create_engine(f"sqlite:///{live.data_dir / 'rag.db'}")
    with Session(engine) as session:
        original = session.scalars(select(row).where(where)).one()
        values = {a.key: getattr(original, a.key) for a in row.__mapper__.column_attrs}
        session.add_all(row(**{**values, **change}) for change in changes)
        session.commit()
    engine.dispose()


def _delete(live: LiveServer, *statements: Any) -> None:
    """Remove what a test added straight in the server's database."""
    engine = create_engine(f"sqlite:///{live.data_dir / 'rag.db'}")
    with Session(engine) as session, session.begin():
        for statement in statements:
            session.execute(statement)
    engine.dispose()


def test_the_chart_shows_the_newest_runs_by_date_and_pages_back(
    live: LiveServer, browser: Any
) -> None:
    ada = Person(live, "ada")
    items = [{"question": QUESTION, "expected": [{"source": "manual.pdf", "page": 8}]}]
    made = ada.api("POST", "/evaluations/sets", json={"name": "Runs by date", "items": items})
    set_id = made["set_id"]
    for _ in range(2):
        ada.run(set_id)
    runs = ada.api("GET", "/evaluations/runs", params={"set_id": set_id})["data"]
    newest = runs[-1]
    # 110 older runs, a year back and a day apart, whose page MRR@10 is 0.25.
    first = runs[0]
    when = datetime.fromisoformat(first["created_at"]) - timedelta(days=365)
    summary = json.dumps({**first["summary"], "page_mrr@10": 0.25})
    _copies(
        live,
        EvaluationRunRow,
        EvaluationRunRow.run_id == first["run_id"],
        [
            {
                "run_id": f"run_bydate{i:03d}",
                "created_at": when + timedelta(days=i),
                "updated_at": when + timedelta(days=i),
                "summary": summary,
            }
            for i in range(110)
        ],
    )
    try:
        page = sign_in(browser, ada)
        page.get_by_role("link", name="Quality").click()
        page.get_by_label("Test set", exact=True).select_option(value=set_id)
        chart = page.get_by_role("img", name="Page MRR@10")
        dots = chart.locator("circle")
        expect(dots).to_have_count(100)
        values = [float(v) for v in dots.evaluate_all("(d) => d.map((e) => e.dataset.value)")]
        # The newest hundred: the two real runs last, after 98 of the old ones.
        assert values[-1] == pytest.approx(newest["summary"]["page_mrr@10"])
        assert values[:98] == [0.25] * 98
        day = datetime.fromisoformat(newest["created_at"])
        labels = chart.locator("text").all_text_contents()
        assert "Run 1" not in labels and str(day.day) in labels[-1], labels
        assert any(day.strftime("%b") in label for label in labels), labels
        pager = page.get_by_role("group", name="Pages of runs")
        expect(pager).to_contain_text("Runs 13–112 of 112")
        pager.get_by_role("button", name="Previous").click()
        expect(pager).to_contain_text("Runs 1–100 of 112")
        expect(dots).to_have_count(100)
        older = [float(v) for v in dots.evaluate_all("(d) => d.map((e) => e.dataset.value)")]
        assert older == [0.25] * 100
        figure = page.locator("#eval-chart-figure")
        figure.screenshot(path=str(artifacts_dir() / "chart-dates.png"))
        page.close()
    finally:
        _delete(live, delete(EvaluationRunRow).where(EvaluationRunRow.run_id.like("run_bydate%")))


@contextmanager
def filler_documents(live: LiveServer, count: int) -> Iterator[None]:
    """`count` documents newer than manual.pdf (records only, no passages), named filler-000.txt
    and on: the manual falls past the first pages of the listing. Gone again afterwards."""
    manual = next(
        d
        for d in Person(live, "max").api("GET", "/documents")["data"]
        if d["source"] == "manual.pdf"
    )
    newer = datetime.fromisoformat(manual["uploaded_at"]) + timedelta(minutes=1)
    _copies(
        live,
        DocumentRow,
        DocumentRow.document_id == manual["document_id"],
        [
            {
                "document_id": f"doc_filler{i:03d}",
                "source": f"filler-{i:03d}.txt",
                "uploaded_at": newer + timedelta(seconds=i),
                "updated_at": newer + timedelta(seconds=i),
            }
            for i in range(count)
        ],
    )
    try:
        yield
    finally:
        _delete(live, delete(DocumentRow).where(DocumentRow.document_id.like("doc_filler%")))


def test_the_bench_finds_any_document_by_typing_its_name(live: LiveServer, browser: Any) -> None:
    with filler_documents(live, 120):
        page = sign_in(browser, Person(live, "max"))
        page.get_by_role("link", name="Quality").click()
        picker = page.get_by_label("Only in the document")
        expect(page.get_by_text("type more of the name to find the others")).to_be_visible()
        assert picker.locator("option", has_text="manual.pdf").count() == 0
        page.get_by_label("Find a document by name").fill("manu")
        expect(picker.locator("option")).to_have_text(["Any document", "manual.pdf"])
        expect(page.get_by_text("1 document whose name starts with “manu”.")).to_be_visible()
        picker.select_option(label="manual.pdf")
        page.get_by_label("Text to search for").fill("When is the canteen closed?")
        page.get_by_role("button", name="Test retrieval").click()
        expect(passages(page).first).to_be_visible()
        sources = passages(page).locator("strong").all_text_contents()
        assert sources and set(sources) == {"manual.pdf"}, sources
        page.close()


def test_the_documents_view_pages_through_every_document_and_filters_by_name(
    live: LiveServer, browser: Any
) -> None:
    with filler_documents(live, 120):
        reader = Person(live, "rex")
        total = reader.api("GET", "/documents")["count"]
        assert total == 121  # the reader reads the manual and the 120 fillers, not the board's
        page = sign_in(browser, reader)
        table = page.get_by_role("table", name="Your documents")
        rows = table.get_by_role("row").filter(has=page.get_by_role("cell"))
        expect(rows).to_have_count(100)
        pages = page.get_by_role("group", name="Pages of documents")
        expect(pages).to_contain_text(f"Documents 1–100 of {total}")
        expect(rows.filter(has_text="manual.pdf")).to_have_count(0)
        pages.get_by_role("button", name="Next").click()
        expect(pages).to_contain_text(f"Documents 101–{total} of {total}")
        expect(rows).to_have_count(total - 100)
        expect(rows.last).to_contain_text("manual.pdf")  # the oldest, last
        pages.get_by_role("button", name="Previous").click()
        expect(rows.first).to_contain_text("filler-119.txt")  # the newest, first

        name = page.get_by_label("Show documents whose name starts with")
        name.fill("manu")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("manual.pdf")
        expect(pages).to_be_hidden()  # one page holds it
        name.fill("filler-11")
        expect(rows).to_have_count(10)
        name.fill("nothing-like-it")
        expect(
            page.get_by_text("No document's name starts with “nothing-like-it”.")
        ).to_be_visible()
        expect(table).to_be_hidden()
        name.fill("")
        expect(rows).to_have_count(100)
        audit = page.evaluate(A11Y_AUDIT)
        assert audit["unnamed"] == [] and audit["low"] == [], audit
        page.close()


def test_the_thumbs_down_picker_finds_any_document_by_name(live: LiveServer, browser: Any) -> None:
    ada = Person(live, "ada")
    reader = ada.add_user("rex-picks-by-name", "reader")
    with filler_documents(live, 120):
        page = sign_in(browser, reader)
        page.get_by_label("Question", exact=True).fill(QUESTION)
        page.get_by_role("button", name="Ask", exact=True).click()
        expect(page.get_by_role("group", name="Was this answer helpful?")).to_be_visible(
            timeout=60_000
        )
        page.get_by_role("button", name="Not helpful").click()
        picker = page.get_by_label("Document it should have used")
        expect(page.get_by_text("type more of the name to find the others")).to_be_visible()
        assert picker.locator("option", has_text="manual.pdf").count() == 0
        search = page.get_by_label("Find the document by name")
        search.fill("manu")
        search.press("Enter")  # finds at once, and sends nothing yet
        expect(picker.locator("option")).to_have_text(["— choose a document —", "manual.pdf"])
        expect(page.get_by_role("status").filter(has_text="saved")).to_have_count(0)
        picker.select_option(label="manual.pdf")
        page.get_by_label("Page", exact=True).fill("1")
        page.get_by_role("button", name="Send details").click()
        expect(
            page.get_by_role("status").filter(has_text="your details were saved")
        ).to_be_visible()
        page.close()
    (rated,) = ada.api("GET", "/feedback", params={"user_id": reader.user_id})["data"]
    assert [(e["source"], e["page"]) for e in rated["expected"]] == [("manual.pdf", 1)]


def test_the_admin_pages_back_through_older_feedback(live: LiveServer, browser: Any) -> None:
    ada = Person(live, "ada")
    rated = ada.rate_down("The newest rating")
    newest = datetime.fromisoformat(rated["updated_at"])
    # 60 older ratings (records only), a day apart, older than any other of the tenant's
    # (made today): more than the table's page of 50.
    _copies(
        live,
        AnswerFeedbackRow,
        AnswerFeedbackRow.answer_id == rated["answer_id"],
        [
            {
                "id": None,
                "answer_id": f"oldanswer{i:03d}",
                "comment": f"old rating {i:03d}",
                "created_at": newest - timedelta(days=60 - i),
                "updated_at": newest - timedelta(days=60 - i),
            }
            for i in range(60)
        ],
    )
    total = ada.api("GET", "/feedback")["count"]
    try:
        page = sign_in(browser, ada)
        page.get_by_role("link", name="Quality").click()
        table = page.get_by_role("table", name="Ratings of answers, newest first")
        rows = table.get_by_role("row").filter(has=page.get_by_role("cell"))
        pages = page.get_by_role("group", name="Pages of ratings")
        expect(pages).to_contain_text(f"Ratings 1–50 of {total}")
        expect(rows).to_have_count(50)
        expect(rows.filter(has_text="old rating 000")).to_have_count(0)
        pages.get_by_role("button", name="Next").click()
        expect(pages).to_contain_text(f"Ratings 51–{total} of {total}")
        expect(rows.last).to_contain_text("old rating 000")  # the oldest, last
        page.get_by_label("Rating", exact=True).select_option(label="Helpful")
        expect(pages).to_be_hidden()  # back to the first page of what the filter keeps
        page.close()
    finally:
        _delete(
            live, delete(AnswerFeedbackRow).where(AnswerFeedbackRow.answer_id.like("oldanswer%"))
        )


def test_the_set_picker_offers_every_test_set(live: LiveServer, browser: Any) -> None:
    items = [{"question": QUESTION, "expected": [{"source": "manual.pdf", "page": 1}]}]
    member = Person(live, "max")
    made = member.api(
        "POST", "/evaluations/sets", json={"name": "Newest in the picker", "items": items}
    )
    # 110 older sets (records only): the first set made falls past a page of 100.
    _copies(
        live,
        EvaluationSetRow,
        EvaluationSetRow.set_id == made["set_id"],
        [
            {
                "set_id": f"set_old{i:03d}",
                "name": f"old set {i:03d}",
                "created_at": datetime.fromisoformat(made["created_at"]) - timedelta(days=i + 1),
            }
            for i in range(110)
        ],
    )
    total = member.api("GET", "/evaluations/sets")["count"]
    assert total >= 111
    try:
        page = sign_in(browser, member)
        page.get_by_role("link", name="Quality").click()
        picker = page.get_by_label("Test set", exact=True)
        expect(picker.locator("option")).to_have_count(total)
        picker.select_option(label="old set 109 (1 question)")  # the oldest
        page.get_by_role("button", name="Run evaluation").click()
        runs_table = page.get_by_role("table", name="Runs of this set")
        expect(runs_table.get_by_role("row").nth(1)).to_contain_text("done", timeout=60_000)
        page.close()
    finally:
        _delete(
            live,
            delete(EvaluationRunRow).where(EvaluationRunRow.set_id.like("set_old%")),
            delete(EvaluationSetRow).where(EvaluationSetRow.set_id.like("set_old%")),
        )


def test_a_page_range_that_runs_backwards_is_named_not_searched(
    live: LiveServer, browser: Any
) -> None:
    # From page 5 to page 2 matched nothing and said only "Nothing was found.".
    page = sign_in(browser, Person(live, "max"))
    page.get_by_role("link", name="Quality").click()
    page.get_by_label("Text to search for").fill("When is the canteen closed?")
    page.get_by_label("From page").fill("5")
    page.get_by_label("To page").fill("2")
    searches: list[str] = []
    page.on(
        "request",
        lambda request: searches.append(request.url) if "/search" in request.url else None,
    )
    page.get_by_role("button", name="Test retrieval").click()
    expect(page.get_by_text("From page 5 is after to page 2: nothing could match.")).to_be_visible()
    assert searches == []
    page.close()


def test_a_page_that_cannot_be_saved_with_a_rating_is_named(live: LiveServer, browser: Any) -> None:
    # Page -1 was left out and "your details were saved" said; a page past the document's end
    # was "Your details was refused"; a page with no document was dropped without a word.
    ada = Person(live, "ada")
    reader = ada.add_user("rex-names-no-page", "reader")
    page = sign_in(browser, reader)
    page.get_by_label("Question", exact=True).fill(QUESTION)
    page.get_by_role("button", name="Ask", exact=True).click()
    page.get_by_role("button", name="Not helpful").click(timeout=60_000)
    status = page.get_by_role("group", name="Was this answer helpful?").get_by_role("status")
    expect(status).to_contain_text("you rated this answer not helpful")
    page.get_by_label("Page", exact=True).fill("3")
    page.get_by_role("button", name="Send details").click()
    expect(status).to_have_text("Nothing was sent: choose the document that page is in.")
    expect(page.get_by_label("Document it should have used")).to_be_focused()
    page.get_by_label("Document it should have used").select_option(label="manual.pdf")
    for typed in ("-1", "2.5"):
        page.get_by_label("Page", exact=True).fill(typed)
        page.get_by_role("button", name="Send details").click()
        expect(status).to_have_text(
            "Nothing was sent: the page must be a whole number, 1 or more (or empty)."
        )
        expect(page.get_by_label("Page", exact=True)).to_be_focused()
    page.get_by_label("Page", exact=True).fill("999")
    page.get_by_role("button", name="Send details").click()
    expect(status).to_have_text(
        f"Your details were not saved: expected page 999 is not in 'manual.pdf' (1-{len(TOPICS)})."
    )
    page.close()
    feedback = ada.api("GET", "/feedback", params={"rating": "down", "user_id": reader.user_id})
    assert [entry["expected"] for entry in feedback["data"]] == [[]]
