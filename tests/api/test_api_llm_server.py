"""The service answering through a real OpenAI-compatible server (llama-cpp-python's, on the
shipped GGUF) with RAG_LLM_PROVIDER=openai: a streamed, cited answer over HTTP, and when that
server dies mid-answer, the stream's error event and then the 503 envelope."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from thread_server import ThreadServer, serving

from app.main import create_app
from tests.api.harness import DEFAULT_PASSWORD, api_settings, assert_error_body
from tests.providers.llm_servers import API_KEY, SERVED_MODEL, ServerProcess, start_llama_server

pytestmark = pytest.mark.slow

DOC = b"The spare key for the boiler room hangs on hook 7 behind the reception desk."


@dataclass
class Deployment:
    """The service (a live uvicorn) answering through its own llama.cpp server."""

    llm_server: ServerProcess
    service: ThreadServer
    headers: dict[str, str]


def _events(lines: list[str]) -> list[tuple[str, dict[str, object]]]:
    """(event, data) pairs of a server-sent event stream."""
    events, name = [], ""
    for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append((name, json.loads(line.removeprefix("data: "))))
    return events


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    llm_server = start_llama_server(tmp_path_factory.mktemp("llama-server"))
    settings = api_settings(
        tmp_path_factory.mktemp("service"),
        llm_provider="openai",
        llm_model=SERVED_MODEL,
        openai_base_url=llm_server.root_url + "/v1",
        openai_api_key=API_KEY,
        llm_timeout_s=300.0,
    )
    try:
        with serving(create_app(settings)) as service:
            record = service.container.users.create_user(
                tenant_id="boiler", username="keeper", password=DEFAULT_PASSWORD
            )
            token = service.container.token_codec.issue(record.id, "boiler").access_token
            headers = {"Authorization": f"Bearer {token}"}
            upload = httpx.post(
                service.url + "/documents", files={"file": ("desk.txt", DOC)}, headers=headers
            )
            assert upload.status_code == 202, upload.text
            job_url = f"{service.url}/jobs/{upload.json()['job_id']}"
            deadline = time.monotonic() + 180
            while (job := httpx.get(job_url, headers=headers).json())["status"] != "done":
                assert job["status"] != "failed" and time.monotonic() < deadline, job
                time.sleep(0.1)
            yield Deployment(llm_server, service, headers)
    finally:
        llm_server.kill()


def test_streamed_answer_from_the_server_is_cited(deployment: Deployment) -> None:
    response = httpx.post(
        deployment.service.url + "/query/stream",
        json={"question": "Where does the spare key for the boiler room hang?"},
        headers=deployment.headers,
        timeout=300,
    )
    assert response.status_code == 200, response.text
    events = _events(response.text.splitlines())
    tokens = [str(data["text"]) for name, data in events if name == "token"]
    text = "".join(tokens)
    print(f"{text!r} in {len(tokens)} token events")
    assert "hook 7" in text and "[1]" in text
    assert len(tokens) >= 3  # streamed as generated
    citations = next(data for name, data in events if name == "citations")
    assert [c["source"] for c in citations["citations"]] == ["desk.txt"]  # type: ignore[index]
    assert events[-1][0] == "done"


def test_server_killed_mid_answer_is_an_error_event_then_a_503(deployment: Deployment) -> None:
    lines: list[str] = []
    with httpx.stream(
        "POST",
        deployment.service.url + "/query/stream",
        json={"question": "What hangs on hook 7 behind the reception desk?"},
        headers=deployment.headers,
        timeout=300,
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            lines.append(line)
            if line == "event: token" and deployment.llm_server.process.poll() is None:
                deployment.llm_server.kill()
    events = _events(lines)
    print(events)
    assert any(name == "token" for name, _ in events)
    name, error = events[-1]
    assert name == "error" and error["code"] == "provider_unavailable", events
    port = str(deployment.llm_server.port)
    assert port not in "\n".join(lines) and "127.0.0.1" not in "\n".join(lines)

    # The next question finds the server gone: the 503 envelope, without its address.
    after = httpx.post(
        deployment.service.url + "/query",
        json={"question": "Which hook holds the boiler room key?"},
        headers=deployment.headers,
        timeout=60,
    )
    assert_error_body(after, 503, "provider_unavailable")
    assert port not in after.text
