"""Backpressure on answers through a real uvicorn server: bounded answers and streams, fast
429/503 with Retry-After, cache hits without a slot, LLM work off the default threadpool, and a
client that hangs up mid-stream (/query/stream, /v1/chat/completions, a conversation turn)
freeing the model and its slots at once, and an evaluation run's answers waiting behind
people's questions.

The server runs in this process (tests/api/thread_server.py) so the tests can swap in a scripted
model and read the limiters' counts and the model lock; everything else is the real stack.
"""

from __future__ import annotations

import gc
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from thread_server import ServerUser, ThreadServer, serving

from app.main import create_app
from app.providers.types import ChatRequest, LLMDelta
from testkit.builders import text_document
from testkit.waiting import wait_until
from tests.api.harness import api_settings, assert_error_body

pytestmark = pytest.mark.integration

MANUAL = text_document(
    *(
        f"Valve V-{i:03d} on deck {i % 5} is torqued to {20 + i} newton metres and inspected "
        f"every {i % 7 + 1} weeks by the deck crew."
        for i in range(30)
    )
)


class EndlessLLM:
    """A model that never stops by itself, holding its lock while it streams (as llama.cpp
    does): only closing its generator ends the generation and frees the lock."""

    model_id = "endless"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pieces = 0
        self.closed_early = threading.Event()

    def stream(self, request: ChatRequest) -> Iterator[LLMDelta]:
        with self.lock:
            try:
                while True:
                    self.pieces += 1
                    yield LLMDelta("valve ", 12 if self.pieces == 1 else None)
                    time.sleep(0.002)  # a token's worth of work
            except GeneratorExit:
                self.closed_early.set()
                raise


class GatedLLM:
    """Answers only once the test opens the gate; records the threads that ran it."""

    model_id = "gated"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.threads: list[str] = []
        self.questions: list[str] = []  # in the order the model was asked
        self.inside = 0

    def stream(self, request: ChatRequest) -> Iterator[LLMDelta]:
        self.threads.append(threading.current_thread().name)
        self.questions.append(request.grounding.question if request.grounding else "")
        self.inside += 1
        try:
            self.gate.wait(timeout=120)
            yield LLMDelta("Valve V-007 is torqued to 27 newton metres [1].", 12)
        finally:
            self.inside -= 1


def _server(tmp: Path, **overrides: Any) -> Any:
    settings = api_settings(tmp / "data", **overrides)
    return serving(create_app(settings))


def _tenant_with_manual(server: ThreadServer, tenant: str, *names: str) -> list[ServerUser]:
    clients = [ServerUser(server, tenant, name) for name in names]
    job = clients[0].upload("valves.txt", MANUAL)
    assert job["status"] == "done", job
    return clients


def _use_model(server: ThreadServer, llm: object) -> None:
    """Answer with `llm` from now on (answers read the model from the container's bundle)."""
    container = server.container
    container.__dict__["llm"] = llm
    container.__dict__["answer_deps"] = replace(container.answer_deps, llm=llm)


def _in_background(call: Any) -> Any:
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(call)
    pool.shutdown(wait=False)
    return future


def _first_token_then_hang_up(server: ThreadServer, user: ServerUser, question: str) -> None:
    """Open a stream, read until its first `token` event, then close the connection."""
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST", f"{server.url}/query/stream", json={"question": question}, headers=user.headers
        ) as response,
    ):
        assert response.status_code == 200, response.read()
        events = (line for line in response.iter_lines() if line.startswith("event:"))
        assert next(events) == "event: token"


def _open_query_stream(client: httpx.Client, server: ThreadServer, user: ServerUser) -> Any:
    body = {"question": "What torque does valve V-007 need?"}
    return client.stream("POST", f"{server.url}/query/stream", json=body, headers=user.headers)


def _open_chat_stream(client: httpx.Client, server: ThreadServer, user: ServerUser) -> Any:
    body = {
        "model": "rag",
        "stream": True,
        "messages": [{"role": "user", "content": "What torque does valve V-007 need?"}],
    }
    return client.stream(
        "POST", f"{server.url}/v1/chat/completions", json=body, headers=user.headers
    )


def _open_conversation_stream(client: httpx.Client, server: ThreadServer, user: ServerUser) -> Any:
    started = client.post(f"{server.url}/conversations", headers=user.headers)
    assert started.status_code == 201, started.text
    conversation_id = started.json()["conversation_id"]
    return client.stream(
        "POST",
        f"{server.url}/conversations/{conversation_id}/messages?stream=true",
        json={"content": "What torque does valve V-007 need?"},
        headers=user.headers,
    )


def _first_text(lines: Iterator[str]) -> str:
    """Read a stream's lines until its first piece of answer text (either wire format)."""
    for line in lines:
        if line == "event: token":
            return line
        if not line.startswith("data: {"):
            continue
        choices = json.loads(line[6:]).get("choices")  # chat chunks; SSE data has none
        if choices and choices[0]["delta"].get("content"):
            return line
    raise AssertionError("the stream ended before any answer text")


def _stored_turns(server: ThreadServer, user: ServerUser) -> int:
    listing = httpx.get(f"{server.url}/conversations", headers=user.headers).json()
    return sum(conversation["messages"] for conversation in listing["data"])


@pytest.mark.parametrize(
    "open_stream",
    [_open_query_stream, _open_chat_stream, _open_conversation_stream],
    ids=["query", "chat", "conversation"],
)
def test_a_client_that_hangs_up_mid_stream_frees_the_model_and_its_slots(
    tmp_path: Path, open_stream: Any
) -> None:
    with _server(tmp_path, answer_max_concurrent=1, answer_queue_size=0) as server:
        (reader,) = _tenant_with_manual(server, "ship", "reader")
        (other,) = _tenant_with_manual(server, "dock", "other")
        llm = EndlessLLM()
        _use_model(server, llm)
        lane = server.container.answer_lane
        gc.disable()  # what frees the model must be the disconnect, not the garbage collector
        try:
            with (
                httpx.Client(timeout=30) as client,
                open_stream(client, server, reader) as response,
            ):
                assert response.status_code == 200
                # Kept in a name: a dropped line iterator closes the response, hanging up early.
                lines = response.iter_lines()
                _first_text(lines)
                assert llm.lock.locked()
                assert lane.answers.running == 1 and lane.streams.running == 1
                busy = other.query("Which deck is valve V-003 on?", timeout=10)
                assert_error_body(busy, 503, "server_busy")
                assert int(busy.headers["Retry-After"]) >= 1
            # The connection is closed here, with the model still generating.
            assert wait_until(lambda: not llm.lock.locked()), "the model lock was not released"
            assert llm.closed_early.is_set(), "the model's generator was not closed"
            assert wait_until(lambda: lane.answers.running == 0 and lane.streams.running == 0)
            assert _stored_turns(server, reader) == 0  # a turn left half-way is not stored
            # The next answer is admitted and gets the model (its first token streams).
            llm.closed_early.clear()
            _first_token_then_hang_up(server, other, "Which deck is valve V-004 on?")
            assert wait_until(llm.closed_early.is_set)
            assert wait_until(lambda: lane.answers.running == 0 and not llm.lock.locked())
        finally:
            gc.enable()


def test_answers_beyond_the_bounds_are_refused_at_once_with_retry_after(tmp_path: Path) -> None:
    overrides = {
        "answer_max_concurrent": 1,
        "answer_queue_size": 2,
        "answer_queue_per_tenant": 1,
        "answer_queue_max_wait_s": 60.0,
    }
    with _server(tmp_path, **overrides) as server:
        a1, a2, a3 = _tenant_with_manual(server, "alpha", "a1", "a2", "a3")
        (b1,) = _tenant_with_manual(server, "beta", "b1")
        (c1,) = _tenant_with_manual(server, "gamma", "c1")
        llm = GatedLLM()
        _use_model(server, llm)
        lane = server.container.answer_lane
        try:
            running = _in_background(lambda: a1.query("Torque of valve V-001?", timeout=90))
            assert wait_until(lambda: llm.inside == 1)
            queued_a = _in_background(lambda: a2.query("Torque of valve V-002?", timeout=90))
            assert wait_until(lambda: lane.answers.waiting == 1)
            # Refused without waiting: the gate holds the model until the end of the test, so a
            # request queued behind it would never answer (its client would time out).
            own = a3.query("Torque of valve V-003?", timeout=10)  # tenant alpha's queue is full
            assert_error_body(own, 429, "concurrency_limited")
            queued_b = _in_background(lambda: b1.query("Torque of valve V-004?", timeout=90))
            assert wait_until(lambda: lane.answers.waiting == 2)
            busy = c1.query("Torque of valve V-005?", timeout=10)  # the whole queue is full
            assert_error_body(busy, 503, "server_busy")
            for response in (own, busy):
                assert int(response.headers["Retry-After"]) >= 1
        finally:
            llm.gate.set()
        bodies = [f.result().json() for f in (running, queued_a, queued_b)]
        assert [b["cache"] for b in bodies] == ["miss", "miss", "miss"]
        # The queued ones report their wait as a stage of its own.
        assert all("queue" in b["timings"] for b in bodies[1:])
        assert "queue" not in bodies[0]["timings"]
        # Only the lane's threads ever ran the model, one at a time.
        assert llm.threads and all(name.startswith("llm-answer") for name in llm.threads)
        assert lane.answers.running == 0 and lane.answers.waiting == 0


def test_health_login_search_and_cache_hits_answer_while_the_model_is_saturated(
    tmp_path: Path,
) -> None:
    with _server(tmp_path, answer_max_concurrent=1, answer_queue_size=8) as server:
        busy_users = _tenant_with_manual(server, "alpha", *(f"a{i}" for i in range(6)))
        (b1,) = _tenant_with_manual(server, "beta", "b1")
        cached_question = "Which deck is valve V-012 on?"
        assert b1.query(cached_question).json()["cache"] == "miss"  # extractive model
        llm = GatedLLM()
        _use_model(server, llm)
        lane = server.container.answer_lane
        try:
            pending = [
                _in_background(lambda u=user, i=i: u.query(f"Torque of V-0{i}?", timeout=90))
                for i, user in enumerate(busy_users)
            ]
            assert wait_until(lambda: llm.inside == 1 and lane.answers.waiting >= 4)
            # The gate holds the model until the end of the test: any of these waiting behind it
            # would time out instead of answering.
            assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200
            login = httpx.post(
                f"{server.url}/auth/token",
                data={"username": "b1-beta", "password": ServerUser.PASSWORD},
                timeout=10,
            )
            assert login.status_code == 200, login.text
            found = httpx.post(
                f"{server.url}/search",
                json={"query": "valve V-012 deck"},
                headers=b1.headers,
                timeout=5,
            )
            assert found.status_code == 200 and found.json()["results"]
            hit = b1.query(cached_question, timeout=5)
            assert hit.status_code == 200 and hit.json()["cache"] == "hit"
            assert llm.inside == 1, "more than one answer reached the model"
        finally:
            llm.gate.set()
        statuses = sorted(f.result().status_code for f in pending)
        assert set(statuses) <= {200, 429, 503} and 200 in statuses, statuses


def test_open_streams_are_capped_per_user_and_in_total(tmp_path: Path) -> None:
    overrides = {
        "answer_max_concurrent": 4,
        "answer_max_per_tenant": 4,
        "stream_max_open": 2,
        "stream_max_per_tenant": 2,
        "stream_max_per_user": 1,
    }
    with _server(tmp_path, **overrides) as server:
        a1, a2 = _tenant_with_manual(server, "alpha", "a1", "a2")
        (b1,) = _tenant_with_manual(server, "beta", "b1")
        llm = GatedLLM()
        _use_model(server, llm)
        lane = server.container.answer_lane

        def stream(user: ServerUser, question: str) -> httpx.Response:
            return httpx.post(
                f"{server.url}/query/stream",
                json={"question": question},
                headers=user.headers,
                timeout=90,
            )

        try:
            first = _in_background(lambda: stream(a1, "Torque of valve V-001?"))
            assert wait_until(lambda: lane.streams.running == 1 and llm.inside == 1)
            assert_error_body(stream(a1, "Torque of valve V-002?"), 429, "concurrency_limited")
            second = _in_background(lambda: stream(a2, "Torque of valve V-003?"))
            assert wait_until(lambda: lane.streams.running == 2)
            assert_error_body(stream(b1, "Torque of valve V-004?"), 503, "server_busy")
        finally:
            llm.gate.set()
        for done in (first.result(), second.result()):
            assert done.status_code == 200 and "event: done" in done.text
        assert wait_until(lambda: lane.streams.running == 0 and lane.answers.running == 0)


def test_a_question_asked_while_a_run_waits_for_an_answer_slot_is_answered_first(
    tmp_path: Path,
) -> None:
    with _server(tmp_path, answer_max_concurrent=1) as server:
        asker, later = _tenant_with_manual(server, "ship", "asker", "later")
        made = httpx.post(
            f"{server.url}/evaluations/sets",
            json={
                "name": "valves",
                "items": [
                    {"question": "Torque of valve V-009?", "expected": [{"source": "valves.txt"}]}
                ],
            },
            headers=asker.headers,
        )
        assert made.status_code == 201, made.text
        llm = GatedLLM()
        _use_model(server, llm)
        lane = server.container.answer_lane
        try:
            first = _in_background(lambda: asker.query("Torque of valve V-001?", timeout=90))
            assert wait_until(lambda: llm.inside == 1)  # the only answer slot is taken
            run = httpx.post(
                f"{server.url}/evaluations/runs",
                json={"set_id": made.json()["set_id"], "answers": True},
                headers=asker.headers,
            )
            assert run.status_code == 202, run.text
            assert wait_until(lambda: lane.answers.waiting == 1, 60)  # the run's answer
            second = _in_background(lambda: later.query("Torque of valve V-002?", timeout=90))
            assert wait_until(lambda: lane.answers.waiting == 2)
        finally:
            llm.gate.set()
        assert first.result().status_code == 200 and second.result().status_code == 200
        run_url = f"{server.url}/evaluations/runs/{run.json()['run_id']}"
        assert wait_until(
            lambda: httpx.get(run_url, headers=asker.headers).json()["status"] == "done", 60
        )
        assert llm.questions == [
            "Torque of valve V-001?",
            "Torque of valve V-002?",  # came after the run's answer, admitted before it
            "Torque of valve V-009?",
        ]
