"""What clients learn when something fails: a stable code, a generic message and the request id
for server-side failures (the details go to the logs); never a host, port, URL, SQL or an
upstream body. A question too long for the model is a 422 naming the limit."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from app.container import Container
from app.job_runners.runner import run_jobs
from testkit.live_server import free_port
from testkit.local_stack import chroma_server
from tests.api.harness import ApiFactory, ApiHarness, assert_error_body

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
UPSTREAM_SECRET = "upstream-body-7f3a: internal trace at /srv/llm/secret.py"
DOC = b"The spare key for the boiler room hangs on hook 7 behind the reception desk."


def assert_server_error(response: httpx.Response, status: int, code: str, *leaks: str) -> None:
    """A generic 5xx body: the code, the request id (body and header), and none of `leaks`."""
    error = assert_error_body(response, status, code)
    request_id = response.headers["X-Request-ID"]
    assert error["request_id"] == request_id
    assert request_id in error["message"]
    for leak in leaks:
        assert leak.lower() not in response.text.lower(), response.text


class _Upstream(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that fails the way real ones do."""

    reply: tuple[int, dict[str, Any]] = (500, {})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        status, body = self.reply
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def upstream() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def test_an_unreachable_redis_is_a_generic_503_without_its_address(
    api_factory: ApiFactory,
) -> None:
    port = free_port()  # nothing listens there
    harness = api_factory(rate_limit_backend="redis", redis_url=f"redis://127.0.0.1:{port}/0")
    user = harness.add_user("redis-down", login=False)
    for response in (
        harness.client.post("/search", json={"query": "boiler key"}, headers=user.headers),
        harness.client.post("/auth/token", data={"username": user.username, "password": "x"}),
    ):
        assert_server_error(response, 503, "provider_unavailable", str(port), "redis", "refused")


def test_a_stopped_chroma_server_is_a_generic_503_without_its_address(
    api_factory: ApiFactory, tmp_path: Path
) -> None:
    with chroma_server(tmp_path) as port:
        harness = api_factory(
            vector_backend="chroma-http", chroma_host="127.0.0.1", chroma_port=port
        )
        user = harness.add_user("chroma-down")
        assert harness.upload_and_wait(user, "boiler.txt", DOC)["status"] == "done"
    # The server is stopped (as while it restarts): searching and asking are a 503 to retry,
    # not a 500 "internal error".
    for response in (
        harness.client.post("/search", json={"query": "boiler key"}, headers=user.headers),
        harness.client.post("/query", json={"question": "Where is the key?"}, headers=user.headers),
    ):
        assert_server_error(response, 503, "provider_unavailable", str(port), "refused", "http")


def test_an_unexpected_failure_is_a_500_with_only_the_request_id(
    api_factory: ApiFactory,
) -> None:
    harness = api_factory()
    user = harness.add_user("broken-db", login=False)
    with harness.container.database.engine.begin() as connection:
        connection.execute(text("DROP TABLE corpus_versions"))  # storage broken under the app
    response = harness.client.post(
        "/search", json={"query": "boiler key"}, headers={**user.headers, "X-Request-ID": "t-500"}
    )
    assert_server_error(response, 500, "internal_error", "corpus_versions", "sqlite", "table")
    assert response.headers["X-Request-ID"] == "t-500"


def _over_openai(api_factory: ApiFactory, port: int, timeout_s: float) -> ApiHarness:
    """An app whose LLM is an OpenAI-compatible server on this local port."""
    return api_factory(
        llm_provider="openai",
        llm_model="gpt-test",
        openai_api_key="sk-test",
        openai_base_url=f"http://127.0.0.1:{port}/v1",
        llm_timeout_s=timeout_s,
    )


def _asker_in(harness: ApiHarness, tenant: str) -> Any:
    """A user of `tenant` whose desk note is indexed."""
    user = harness.add_user(tenant)
    assert harness.upload_and_wait(user, "desk.txt", DOC)["status"] == "done"
    return user


@pytest.fixture(scope="module")
def openai_harness(api_factory: ApiFactory, upstream: ThreadingHTTPServer) -> ApiHarness:
    return _over_openai(api_factory, upstream.server_port, timeout_s=10)


@pytest.fixture(scope="module")
def asker(openai_harness: ApiHarness) -> Any:
    return _asker_in(openai_harness, "llm-errors")


def _ask(harness: ApiHarness, user: Any, path: str = "/query") -> httpx.Response:
    question = "Where does the spare key for the boiler room hang?"
    return harness.client.post(path, json={"question": question}, headers=user.headers)


def test_an_upstream_llm_error_reaches_the_client_without_url_or_body(
    openai_harness: ApiHarness, upstream: ThreadingHTTPServer, asker: Any
) -> None:
    _Upstream.reply = (500, {"error": {"message": UPSTREAM_SECRET, "type": "server_error"}})
    response = _ask(openai_harness, asker)
    leaks = (str(upstream.server_port), "upstream-body", "/srv/llm", "127.0.0.1", "http://")
    assert_server_error(response, 503, "provider_unavailable", *leaks)
    # The stream's error event follows the same rule.
    streamed = _ask(openai_harness, asker, "/query/stream")
    assert streamed.status_code == 200
    assert "event: error" in streamed.text and '"provider_unavailable"' in streamed.text
    assert '"request_id"' in streamed.text
    for leak in leaks:
        assert leak not in streamed.text, streamed.text


def test_an_unreachable_llm_server_is_a_generic_503(api_factory: ApiFactory) -> None:
    port = free_port()
    harness = _over_openai(api_factory, port, timeout_s=5)
    user = _asker_in(harness, "llm-down")
    assert_server_error(_ask(harness, user), 503, "provider_unavailable", str(port), "http://")


def test_an_upstream_context_overflow_is_a_422_prompt_too_long(
    openai_harness: ApiHarness, asker: Any
) -> None:
    _Upstream.reply = (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 4096 tokens. " + UPSTREAM_SECRET,
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
    )
    error = assert_error_body(_ask(openai_harness, asker), 422, "prompt_too_long")
    assert "context" in error["message"] and "shorter question" in error["message"]
    assert "upstream-body" not in error["message"]


def test_a_retried_job_shows_a_code_not_the_exception(
    api_factory: ApiFactory, tmp_path: Path
) -> None:
    # The worker's side: a container whose embedding server is down (a real connection
    # refused), sharing the job table with the API process.
    port = free_port()
    worker_dir = tmp_path / "worker"
    database_url = f"sqlite:///{worker_dir / 'rag.db'}"
    harness = api_factory(database_url=database_url, start_workers=False)
    worker = Container(
        harness.settings.model_copy(
            update={
                "data_dir": worker_dir,
                "embedding_provider": "openai",
                "embedding_model": "text-embedding-3-small",
                "openai_api_key": "sk-test",
                "openai_base_url": f"http://127.0.0.1:{port}/v1",
            }
        )
    )
    user = harness.add_user("job-errors", login=False)
    accepted = harness.upload(user, "desk.txt", DOC)  # queued: this API process runs no jobs
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["job_id"]
    claimed = worker.jobs.claim(job_id)
    assert claimed is not None
    # A first attempt that may be retried: put back in the queue.
    retried = run_jobs(worker.ingest_deps, [claimed], max_attempts=claimed.attempts + 1)
    assert retried == [job_id]

    stored = worker.jobs.get(user.tenant, job_id)
    detail = stored.error if stored is not None else ""
    assert detail and "APIConnectionError" in detail  # operators keep the detail
    shown = harness.client.get(f"/jobs/{job_id}", headers=user.headers).json()
    assert shown["status"] == "queued" and shown["error_code"] == "retrying", shown
    assert "retried" in shown["error"]
    for leak in (str(port), "http://", "APIConnectionError", "Connection error", "openai:"):
        assert leak not in json.dumps(shown), shown


def test_a_client_side_job_failure_keeps_its_actionable_message(api: ApiHarness) -> None:
    user = api.add_user("job-empty")
    job = api.upload_and_wait(user, "empty.txt", b"")
    assert job["status"] == "failed" and job["error_code"] == "empty_document", job
    assert "empty" in job["error"].lower()


@pytest.mark.slow
def test_a_question_too_long_for_the_local_model_is_a_422_naming_the_limit(
    api_factory: ApiFactory,
) -> None:
    harness = api_factory(
        llm_provider="llamacpp", models_dir=REPO / "models", llm_context_tokens=256
    )
    user = harness.add_user("tiny-context")
    assert harness.upload_and_wait(user, "desk.txt", DOC)["status"] == "done"
    question = "Where does the spare key for the boiler room hang? " * 12
    response = harness.client.post("/query", json={"question": question}, headers=user.headers)
    error = assert_error_body(response, 422, "prompt_too_long")
    assert "256 tokens" in error["message"], error
