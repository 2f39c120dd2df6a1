"""GET /metrics on a live server: what an operator's Prometheus would read after real traffic.

The server runs in this process (tests/api/thread_server.py) with the real stack (USE embedder,
embedded Chroma, extractive model); each step is followed by a scrape parsed with
`prometheus_client.parser`, and every counter and histogram must have moved by exactly what the
step did, and nothing else by anything a user would not expect.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from thread_server import ServerUser, ThreadServer, serving

from app.api.access import route_keys
from app.errors import ConfigurationError
from app.main import create_app
from app.providers.types import ChatRequest, LLMDelta
from testkit.builders import text_document
from testkit.live_server import free_port
from testkit.waiting import wait_until
from tests.api.harness import api_settings, assert_error_body

pytestmark = pytest.mark.integration

TOKEN = "scrape-secret-0123456789"
MANUAL = text_document(
    *(
        f"Valve V-{i:03d} on deck {i % 5} is torqued to {20 + i} newton metres and inspected "
        f"every {i % 7 + 1} weeks by the deck crew."
        for i in range(30)
    )
)
QUESTION = "What torque does valve V-007 need?"
OFF_TOPIC = "Which grape varieties grow best in volcanic soil?"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Samples:
    """Every sample of one scrape, keyed by sample name and label set."""
    response = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when the series does not exist yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before: Samples, after: Samples) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The counters and histogram counts that changed, and by how much."""
    names = re.compile(r".*(_total|_count)$")
    return {
        key: after[key] - before.get(key, 0.0)
        for key in after
        if names.match(key[0]) and after[key] != before.get(key, 0.0)
    }


def series(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset(labels.items())


class GatedLLM:
    """Answers only once the test opens the gate (holds the one answer slot until then)."""

    model_id = "gated"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.inside = threading.Event()

    def stream(self, request: ChatRequest) -> Iterator[LLMDelta]:
        self.inside.set()
        self.gate.wait(timeout=120)
        yield LLMDelta("Valve V-007 is torqued to 27 newton metres [1].", 12)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    settings = api_settings(
        tmp_path_factory.mktemp("metrics") / "data",
        metrics_enabled=True,
        metrics_token=TOKEN,
        answer_queue_size=0,  # a second answer of the same user is refused at once (429)
    )
    with serving(create_app(settings)) as running:
        yield running


@pytest.fixture(scope="module")
def reader(server: ThreadServer) -> ServerUser:
    return ServerUser(server, "harbour", "reader")


def test_metrics_need_the_token(server: ThreadServer) -> None:
    assert_error_body(httpx.get(f"{server.url}/metrics"), 401, "unauthorized")
    wrong = httpx.get(f"{server.url}/metrics", headers={"Authorization": "Bearer nope"})
    assert_error_body(wrong, 401, "unauthorized")
    samples = scrape(server.url)
    embedder = server.container.embedder.model_id
    info = series("rag_build_info", version="0.1.0", embedder=embedder, llm_provider="extractive")
    assert samples[info] == 1.0


def test_an_upload_counts_one_job_its_pages_chunks_and_stages(
    server: ThreadServer, reader: ServerUser
) -> None:
    before = scrape(server.url)
    uploaded_at = time.time()
    job = reader.upload("valves.txt", MANUAL)
    assert job["status"] == "done", job
    after = scrape(server.url)
    changes = moved(before, after)
    assert changes[series("rag_jobs_total", outcome="done")] == 1
    assert changes[series("rag_ingested_chunks_total")] == job["chunks_indexed"]
    assert changes[series("rag_ingested_pages_total")] == 1
    for stage in ("parse", "embed", "store", "total"):
        assert changes[series("rag_job_duration_seconds_count", stage=stage)] == 1
    upload = series("rag_http_requests_total", route="/documents", method="POST", status="202")
    assert changes[upload] == 1
    polls = series("rag_http_requests_total", route="/jobs/{job_id}", method="GET", status="200")
    assert changes[polls] >= 1
    assert value(after, "rag_jobs_queued", queue="ingest") == 0
    assert value(after, "rag_jobs_oldest_queued_age_seconds", queue="ingest") == 0
    # The API's own job threads beat when they reach the job table.
    assert value(after, "rag_worker_heartbeat_timestamp_seconds") >= uploaded_at
    assert job["job_id"] not in str(after)


def test_a_search_counts_one_request_and_its_duration(
    server: ThreadServer, reader: ServerUser
) -> None:
    before = scrape(server.url)
    started = time.perf_counter()
    assert reader.post("/search", {"query": "valve torque"}).status_code == 200
    elapsed = time.perf_counter() - started
    after = scrape(server.url)
    changes = moved(before, after)
    key = {"route": "/search", "method": "POST"}
    assert changes == {
        series("rag_http_requests_total", **key, status="200"): 1,
        series("rag_http_request_duration_seconds_count", **key): 1,
        # the scrape before this one is counted by this scrape
        series("rag_http_requests_total", route="/metrics", method="GET", status="200"): 1,
        series("rag_http_request_duration_seconds_count", route="/metrics", method="GET"): 1,
    }
    spent = value(after, "rag_http_request_duration_seconds_sum", **key) - value(
        before, "rag_http_request_duration_seconds_sum", **key
    )
    assert 0 < spent <= elapsed


def test_an_answer_then_its_cache_hit(server: ThreadServer, reader: ServerUser) -> None:
    before = scrape(server.url)
    response = reader.post("/query", {"question": QUESTION})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["refused"] is False and body["cache"] == "miss", body
    after = scrape(server.url)
    changes = moved(before, after)
    assert changes[series("rag_answers_total", outcome="answered")] == 1
    assert changes[series("rag_cache_requests_total", result="miss")] == 1
    assert series("rag_cache_requests_total", result="hit") not in changes
    assert changes[series("rag_llm_time_to_first_token_seconds_count")] == 1
    assert changes[series("rag_llm_tokens_total", kind="completion")] >= 1
    # Every stage of the answer's `timings`, once, with the time the body reports.
    for stage, ms in body["timings"].items():
        assert changes[series("rag_stage_duration_seconds_count", stage=stage)] == 1, stage
        spent = value(after, "rag_stage_duration_seconds_sum", stage=stage) - value(
            before, "rag_stage_duration_seconds_sum", stage=stage
        )
        assert spent * 1000 == pytest.approx(ms, abs=0.01), stage
    observed = {dict(labels)["stage"] for name, labels in changes if name.startswith("rag_stage")}
    assert observed == set(body["timings"])
    # The whole answer: at least its stages, at most the total the body reports.
    assert changes[series("rag_answer_duration_seconds_count", outcome="answered")] == 1
    whole = value(after, "rag_answer_duration_seconds_sum", outcome="answered") - value(
        before, "rag_answer_duration_seconds_sum", outcome="answered"
    )
    assert sum(body["timings"].values()) - 0.1 <= whole * 1000 <= body["total_ms"]

    hit = reader.post("/query", {"question": QUESTION})
    assert hit.json()["cache"] == "hit"
    again = moved(after, scrape(server.url))
    assert again[series("rag_answers_total", outcome="cache_hit")] == 1
    assert again[series("rag_cache_requests_total", result="hit")] == 1
    assert series("rag_answers_total", outcome="answered") not in again
    assert series("rag_llm_time_to_first_token_seconds_count") not in again


def test_a_question_the_gate_refuses(server: ThreadServer, reader: ServerUser) -> None:
    before = scrape(server.url)
    response = reader.post("/query", {"question": OFF_TOPIC})
    assert response.json()["refused"] is True, response.text
    changes = moved(before, scrape(server.url))
    assert changes[series("rag_answers_total", outcome="refused_gate")] == 1
    assert series("rag_answers_total", outcome="refused_model") not in changes
    assert series("rag_answers_total", outcome="answered") not in changes
    assert series("rag_llm_time_to_first_token_seconds_count") not in changes


def test_an_answer_refused_for_load_is_counted_and_the_slot_shows(
    server: ThreadServer, reader: ServerUser
) -> None:
    container = server.container
    original = container.answer_deps
    llm = GatedLLM()
    container.__dict__["answer_deps"] = replace(original, llm=llm)
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        before = scrape(server.url)
        first = pool.submit(reader.post, "/query", {"question": "Which deck is valve V-003 on?"})
        assert llm.inside.wait(60)
        holding = scrape(server.url)
        assert value(holding, "rag_admission_in_flight", lane="answers") == 1
        refused = reader.post("/query", {"question": "Which deck is valve V-004 on?"})
        assert_error_body(refused, 429)
        changes = moved(before, scrape(server.url))
        assert (
            changes[series("rag_admission_refused_total", lane="answers", reason="user_or_tenant")]
            == 1
        )
        status = series("rag_http_requests_total", route="/query", method="POST", status="429")
        assert changes[status] == 1
        llm.gate.set()
        assert first.result(60).status_code == 200
        assert wait_until(
            lambda: value(scrape(server.url), "rag_admission_in_flight", lane="answers") == 0
        )
    finally:
        llm.gate.set()
        pool.shutdown(wait=True)
        container.__dict__["answer_deps"] = original


def test_a_failed_job_is_counted_as_failed(server: ThreadServer, reader: ServerUser) -> None:
    before = scrape(server.url)
    job = reader.upload("broken.pdf", b"%PDF-1.7\nthis is not a PDF body at all\n%%EOF")
    assert job["status"] == "failed", job
    changes = moved(before, scrape(server.url))
    assert changes[series("rag_jobs_total", outcome="failed")] == 1
    assert series("rag_jobs_total", outcome="done") not in changes
    assert series("rag_ingested_chunks_total") not in changes


def test_route_labels_are_templates_never_raw_ids(server: ThreadServer, reader: ServerUser) -> None:
    for path in ("/documents/doc_0123456789abcdef", "/jobs/job_deadbeef", "/no/such/page/42"):
        httpx.get(f"{server.url}{path}", headers=reader.headers)
    routes = {path for _, path in route_keys(server.app)} | {"unmatched"}
    labels = {
        dict(labels)["route"] for name, labels in scrape(server.url) if "route" in dict(labels)
    }
    assert "/documents/{document_id}" in labels and "unmatched" in labels
    assert labels <= routes
    assert not any(re.search(r"[0-9a-f]{8}", label) for label in labels)


def test_no_label_names_a_tenant_user_or_question(server: ThreadServer) -> None:
    text = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
    for secret in ("harbour", "reader", "V-007", "valves.txt", "torque"):
        assert secret not in text


def test_metrics_are_off_by_default(tmp_path: Path) -> None:
    with serving(create_app(api_settings(tmp_path / "data"))) as plain:
        for headers in ({}, {"Authorization": f"Bearer {TOKEN}"}, {"Authorization": "Bearer x"}):
            assert_error_body(httpx.get(f"{plain.url}/metrics", headers=headers), 404)


def test_metrics_on_a_port_of_their_own_are_not_on_the_api_port(tmp_path: Path) -> None:
    port = free_port()
    settings = api_settings(tmp_path / "data", metrics_enabled=True, metrics_port=port)
    with serving(create_app(settings)) as own_port:
        assert_error_body(httpx.get(f"{own_port.url}/metrics"), 404)
        response = httpx.get(f"http://127.0.0.1:{port}/metrics")  # no token on this port
        assert response.status_code == 200
        families = {f.name for f in text_string_to_metric_families(response.text)}
        assert {"rag_build_info", "rag_http_requests", "rag_answers"} <= families
        assert httpx.get(f"http://127.0.0.1:{port}/other").status_code == 404
    with pytest.raises(httpx.ConnectError):  # the port closes with the app
        httpx.get(f"http://127.0.0.1:{port}/metrics")


# Linux routes all of 127.0.0.0/8 to the loopback device: a listener on 0.0.0.0 answers on
# 127.0.0.2 too, one bound to 127.0.0.1 does not. That tells the bind address apart without a
# second network interface.
OTHER_LOCAL_ADDRESS = "127.0.0.2"


def test_the_metrics_port_listens_only_on_rag_host_by_default(tmp_path: Path) -> None:
    port = free_port()
    settings = api_settings(tmp_path / "data", metrics_enabled=True, metrics_port=port)
    assert settings.host == "127.0.0.1" and settings.metrics_host is None
    with serving(create_app(settings)):
        assert httpx.get(f"http://127.0.0.1:{port}/metrics").status_code == 200
        with pytest.raises(httpx.ConnectError):  # not on every address (0.0.0.0)
            httpx.get(f"http://{OTHER_LOCAL_ADDRESS}:{port}/metrics")


def test_rag_metrics_host_chooses_the_metrics_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from app import main, metrics

    monkeypatch.setattr(metrics, "_metrics", None)  # this test's enable() leaves nothing behind
    monkeypatch.setattr(metrics, "_queue_probe", None)
    container: Any = SimpleNamespace(embedder=SimpleNamespace(model_id="fake"), queue_depths=dict)
    port = free_port()
    settings = api_settings(tmp_path / "data", metrics_enabled=True, metrics_port=port)
    wide = settings.model_copy(update={"metrics_host": "0.0.0.0"})
    stop = main.start_metrics(wide, container)
    try:  # the compose stack's choice: Prometheus scrapes it from another container
        assert httpx.get(f"http://{OTHER_LOCAL_ADDRESS}:{port}/metrics").status_code == 200
    finally:
        stop()
    narrow = settings.model_copy(update={"host": "0.0.0.0", "metrics_host": "127.0.0.1"})
    stop = main.start_metrics(narrow, container)
    try:  # the API on every address, its metrics on the loopback only
        assert httpx.get(f"http://127.0.0.1:{port}/metrics").status_code == 200
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://{OTHER_LOCAL_ADDRESS}:{port}/metrics")
    finally:
        stop()


def test_metrics_need_a_token_or_a_port_of_their_own(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="RAG_METRICS_ENABLED needs RAG_METRICS_TOKEN"):
        api_settings(tmp_path / "data", metrics_enabled=True)


def test_only_the_tenants_named_get_a_label_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    from prometheus_client import generate_latest

    from app import metrics

    recorded = metrics._create(frozenset({"acme"}))  # a registry of its own
    monkeypatch.setattr(metrics, "_metrics", recorded)
    for tenant in ("acme", "globex", "initech"):
        metrics.answer(metrics.ANSWERED, tenant, {"dense": 1.0})
    assert recorded.registry is not None
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(recorded.registry).decode())
        for s in family.samples
        if s.name == "rag_answers_total"
    }
    assert samples == {
        ("rag_answers_total", (("outcome", "answered"), ("tenant", "acme"))): 1.0,
        ("rag_answers_total", (("outcome", "answered"), ("tenant", "other"))): 2.0,
    }
