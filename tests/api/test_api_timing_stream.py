"""Stage timings that add up, request ids, and the server-sent event stream of /query/stream."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.builders import text_document
from tests.api.harness import ApiHarness, ApiUser, assert_error_body, sse_events

pytestmark = pytest.mark.integration

KNOWN_STAGES = {"cache", "embed_query", "dense", "keyword", "fuse", "rerank", "generate"}
MISS_STAGES = {"cache", "embed_query", "dense", "keyword", "fuse", "generate"}


@pytest.fixture(scope="module")
def reader(api: ApiHarness) -> ApiUser:
    user = api.add_user("timing")
    paragraphs = [
        f"Station {i} of the coastal survey records a tide of {i * 7 % 50} centimetres "
        f"and a wind speed of {i * 3 % 40} knots."
        for i in range(1, 25)
    ]
    job = api.upload_and_wait(user, "survey.txt", text_document(*paragraphs))
    assert job["status"] == "done"
    return user


def test_query_stages_add_up_to_the_total(api: ApiHarness, reader: ApiUser) -> None:
    # How much of the work the stages cover is asserted on a deterministic clock in
    # tests/test_stage_timing.py; wall-clock shares flake on a shared machine.
    for station in (3, 8, 11, 16, 19, 23):
        body = api.query(reader, f"What tide does station {station} record?")
        assert body["cache"] == "miss"
        stages = body["timings"]
        assert MISS_STAGES <= set(stages) <= KNOWN_STAGES
        assert all(ms >= 0 for ms in stages.values())
        summed = sum(stages.values())
        # Stages never nest, so their sum cannot exceed the total (0.01 ms rounding per stage).
        assert summed <= body["total_ms"] + 0.01 * len(stages), (summed, body)


def test_search_stages_add_up_to_the_total(api: ApiHarness, reader: ApiUser) -> None:
    body = api.search(reader, "wind speed at station 7")
    stages = body["timings"]
    assert (
        {"scope", "embed_query", "dense", "keyword", "fuse"}
        <= set(stages)
        <= KNOWN_STAGES | {"scope"}
    )
    assert 0 < sum(stages.values()) <= body["total_ms"] + 0.01 * len(stages)


def test_a_cache_hit_times_only_the_cache(api: ApiHarness, reader: ApiUser) -> None:
    question = "What wind speed does station 5 record?"
    api.query(reader, question)
    hit = api.query(reader, question)
    assert hit["cache"] == "hit" and set(hit["timings"]) == {"cache"}
    assert hit["total_ms"] >= hit["timings"]["cache"]


@pytest.mark.parametrize(
    ("method", "path", "auth"),
    [
        ("GET", "/health", False),
        ("POST", "/search", True),
        ("GET", "/stats", False),  # a 401 carries it too
        ("POST", "/query/stream", True),
    ],
)
def test_a_client_request_id_is_echoed(
    api: ApiHarness, reader: ApiUser, method: str, path: str, auth: bool
) -> None:
    headers = {"X-Request-ID": "req-42.abc_DEF", **(reader.headers if auth else {})}
    kwargs: dict[str, Any] = {"headers": headers}
    if method == "POST":
        kwargs["json"] = {"query" if path == "/search" else "question": "tide at station 2"}
    response = api.client.request(method, path, **kwargs)
    assert response.headers["x-request-id"] == "req-42.abc_DEF"


@pytest.mark.parametrize("sent", [None, "x" * 65, "bad\x01id", "naïve-ümlaut"])
def test_a_missing_or_unsafe_request_id_is_replaced_by_a_fresh_one(
    api: ApiHarness, sent: str | None
) -> None:
    headers = {} if sent is None else {"X-Request-ID": sent.encode("utf-8")}
    first = api.client.get("/health", headers=headers).headers["x-request-id"]
    second = api.client.get("/health", headers=headers).headers["x-request-id"]
    for value in (first, second):
        assert len(value) == 16 and int(value, 16) >= 0
    assert first != second


def test_validation_errors_carry_the_request_id_too(api: ApiHarness, reader: ApiUser) -> None:
    response = api.client.post(
        "/query", json={"question": ""}, headers={**reader.headers, "X-Request-ID": "trace-1"}
    )
    assert_error_body(response, 422)
    assert response.headers["x-request-id"] == "trace-1"


def test_stream_sends_tokens_then_citations_then_done(api: ApiHarness, reader: ApiUser) -> None:
    question = "What tide does station 14 record?"
    response = api.client.post("/query/stream", json={"question": question}, headers=reader.headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    events = sse_events(response)
    names = [name for name, _ in events]
    assert names[-2:] == ["citations", "done"]
    assert names[:-2] and set(names[:-2]) == {"token"}
    streamed = "".join(data["text"] for name, data in events if name == "token")
    citations = events[-2][1]
    done = events[-1][1]
    assert "Station 14" in streamed
    assert citations["refused"] is False and citations["citations"]
    assert all(c["source"] == "survey.txt" and c["page"] == 1 for c in citations["citations"])
    assert done["cache"] == "miss" and set(done["timings"]) >= MISS_STAGES
    # No nesting (a stream's total also holds the event sends).
    assert sum(done["timings"].values()) <= done["total_ms"] + 0.01 * len(done["timings"])

    # The stream cached its answer: /query now hits and returns exactly what was streamed.
    cached = api.query(reader, question)
    assert cached["cache"] == "hit"
    assert cached["answer"] == streamed
    assert cached["citations"] == citations["citations"]
    replay = sse_events(
        api.client.post("/query/stream", json={"question": question}, headers=reader.headers)
    )
    assert [name for name, _ in replay] == ["token", "citations", "done"]
    assert replay[0][1]["text"] == streamed and replay[-1][1]["cache"] == "hit"


@pytest.mark.parametrize(
    "body",
    [{"question": "x" * 2001}, {"question": "  "}, {"question": "ok", "k": 51}, {}],
)
def test_a_bad_stream_request_is_422_before_the_stream_starts(
    api: ApiHarness, reader: ApiUser, body: dict[str, Any]
) -> None:
    response = api.client.post("/query/stream", json=body, headers=reader.headers)
    assert_error_body(response, 422)
    assert response.headers["content-type"].startswith("application/json")


def test_question_length_and_k_caps_are_the_configured_ones(
    api: ApiHarness, reader: ApiUser
) -> None:
    cap, max_k = api.settings.max_question_chars, api.settings.max_k
    for path, field in (("/search", "query"), ("/query", "question")):
        at_cap = {field: "tide " + "x" * (cap - 5), "k": max_k}
        assert api.client.post(path, json=at_cap, headers=reader.headers).status_code == 200
        over = api.client.post(path, json={field: "y" * (cap + 1)}, headers=reader.headers)
        assert str(cap) in assert_error_body(over, 422)["message"]
        too_many = api.client.post(
            path, json={field: "tide", "k": max_k + 1}, headers=reader.headers
        )
        assert str(max_k) in assert_error_body(too_many, 422)["message"]
