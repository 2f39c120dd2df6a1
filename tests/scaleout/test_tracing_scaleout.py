"""OpenTelemetry traces across the job queue: one upload through the API (Redis job backend)
and the rq worker that indexes it make one trace, its spans kept by the SDK's in-memory
exporter. The API is a live uvicorn server and the worker the real rq `SimpleWorker` running
`app.worker.process_job`, both in this process so that one exporter sees both; between them
the job travels through Redis and PostgreSQL exactly as between containers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import uvicorn
from fastapi import FastAPI
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app import worker
from app.config import load_settings
from app.container import Container
from app.job_runners.redis_tasks import rq_worker
from app.job_runners.redis_worker import IngestWorker
from app.jobs.redis_queue import rq_queue
from app.main import create_app
from app.storage.redis_client import connect_redis
from testkit.local_stack import REDIS_URL, LocalStack, free_port
from tests.availability import unavailable
from tests.span_capture import captured_spans

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

NOTE = b"The QUARTZ-4471 relief valve must be inspected every 30 days by the plant engineer."


class _Server:
    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.url = ""


@contextmanager
def serving(app: FastAPI) -> Iterator[_Server]:
    """uvicorn serving `app` on a thread of this process (so its spans reach our exporter)."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 180
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    running = _Server(app)
    running.url = f"http://127.0.0.1:{port}"
    try:
        yield running
    finally:
        server.should_exit = True
        thread.join(60)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with captured_spans() as exporter:
        yield exporter


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    local = LocalStack(tmp_path)
    try:
        try:
            local.start_backends()
        except Exception as exc:  # no PostgreSQL / Redis / chroma CLI here
            unavailable(f"scale-out backends unavailable: {exc}")
        yield local
    finally:
        leftovers = local.close()
        assert not leftovers, f"Redis keys left behind: {leftovers[:10]}"


def _settings(local: LocalStack) -> Any:
    return load_settings(
        _env_file=None,
        env="development",
        jwt_secret=local.jwt_secret,
        data_dir=local.data_dir,
        database_url=local.database_url,
        redis_url=REDIS_URL,
        redis_key_prefix=local.prefix,
        vector_backend="chroma-http",
        chroma_host="127.0.0.1",
        chroma_port=local.chroma_port,
        job_backend="redis",
        cache_backend="redis",
        rate_limit_backend="redis",
        embedding_provider="use",
        llm_provider="extractive",
        reranker="none",
        tracing="otlp",
    )


def _run_worker_until_idle(settings: Any) -> None:
    """What `python -m app.worker --burst` does: rq takes the message, the task indexes."""
    container = Container(settings)
    worker._current = IngestWorker(
        settings, container.ingest_deps, connect_redis(settings.redis_url)
    )
    listen: redis.Redis[bytes] = redis.Redis.from_url(settings.redis_url)
    try:
        rq_worker(rq_queue(settings, listen), listen, f"{settings.redis_key_prefix}-w").work(
            burst=True
        )
    finally:
        worker._current = None
        listen.close()
        container.database.dispose()


def test_one_upload_makes_one_trace_from_the_api_to_the_worker(
    stack: LocalStack, spans: InMemorySpanExporter
) -> None:
    settings = _settings(stack)
    stack.create_user("plant", "operator")
    with serving(create_app(settings)) as server:
        token = httpx.post(
            f"{server.url}/auth/token",
            data={"username": "operator", "password": "correct-horse-battery-staple"},
        ).json()["access_token"]
        headers = {"Authorization": f"Bearer {token}", "X-Request-ID": "upload-trace-1"}
        accepted = httpx.post(
            f"{server.url}/documents", files={"file": ("valve.txt", NOTE)}, headers=headers
        )
        assert accepted.status_code == 202, accepted.text
        job_id = accepted.json()["job_id"]
        stack.job_ids.add(job_id)
        upload_spans = [s for s in spans.get_finished_spans() if s.name == "POST /documents"]
        assert len(upload_spans) == 1
        upload = upload_spans[0]
        assert upload.attributes is not None
        assert upload.attributes["request.id"] == "upload-trace-1"
        assert upload.attributes["http.route"] == "/documents"

        _run_worker_until_idle(settings)
        job = httpx.get(f"{server.url}/jobs/{job_id}", headers=headers).json()
        assert job["status"] == "done", job

    trace_id = upload.context.trace_id
    in_trace: list[ReadableSpan] = [
        s for s in spans.get_finished_spans() if s.context.trace_id == trace_id
    ]
    names = {s.name for s in in_trace}
    # API side: the request; worker side: the job and each of its stages and model calls.
    assert {"POST /documents", "job.index", "job.parse", "job.embed", "job.store"} <= names
    assert "embedding.documents" in names
    (job_span,) = [s for s in in_trace if s.name == "job.index"]
    assert job_span.attributes is not None and job_span.attributes["job.id"] == job_id
    assert job_span.parent is not None and job_span.parent.trace_id == trace_id
    assert job_span.start_time is not None and upload.end_time is not None
    # The worker's spans are children of the job span, which continues the upload's trace.
    by_id = {s.context.span_id: s for s in in_trace}
    for stage in ("job.parse", "job.embed", "job.store"):
        (span,) = [s for s in in_trace if s.name == stage]
        assert span.parent is not None and by_id[span.parent.span_id].name == "job.index"
    # Nothing else was traced under the upload's trace id but the upload and its job.
    other_requests = {s.name for s in in_trace if s.name.startswith(("GET", "POST"))}
    assert other_requests == {"POST /documents"}
