"""The worker runs only the service's own rq task, against the local Redis: a message naming
any other function (or a callback, or a webhook) fails unrun, is logged, and nothing it names is
imported. Each test has its own queue and message ids under a unique prefix."""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from rq import Callback, Queue, SimpleWorker
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer
from rq.webhook import Webhook

from app import worker as worker_module
from app.job_runners.redis_tasks import rq_worker
from app.jobs.redis_queue import TASK

pytestmark = pytest.mark.integration

CANARY = "tests.scaleout.rq_canary"


@pytest.fixture
def queue(redis_namespace: Any) -> Iterator[Queue]:
    """A queue of this test's own; rq's keys for it and its messages are deleted afterwards."""
    client = redis_namespace.client
    yield Queue(f"{redis_namespace.prefix}-ingest", connection=client, serializer=JSONSerializer)
    for key in client.scan_iter(match=f"rq:*{redis_namespace.prefix}*", count=1000):
        client.delete(key)
    client.srem("rq:queues", f"rq:queue:{redis_namespace.prefix}-ingest")
    client.srem("rq:workers", f"rq:worker:{redis_namespace.prefix}-worker")


@pytest.fixture
def canary_unloaded() -> Iterator[None]:
    """The canary module is not imported before the test, nor left imported after it."""
    sys.modules.pop(CANARY, None)
    yield
    sys.modules.pop(CANARY, None)


def run_worker(queue: Queue, prefix: str) -> None:
    """One burst of the worker `python -m app.worker` builds, until the queue is empty."""
    rq_worker(queue, queue.connection, f"{prefix}-worker").work(burst=True)


def refused(queue: Queue, message_id: str) -> str:
    """The failure rq recorded for a message (asserting that it failed)."""
    message = Job.fetch(message_id, connection=queue.connection, serializer=JSONSerializer)
    assert message.get_status() == JobStatus.FAILED
    assert message.exc_info is not None
    return message.exc_info


@pytest.mark.parametrize(
    ("function", "argument"),
    [
        ("os.system", "touch {marker}"),
        ("subprocess.run", ["touch", "{marker}"]),
        (f"{CANARY}.touch", "{marker}"),  # a module nothing imported yet
        ("builtins.exec", "open('{marker}', 'w')"),
    ],
)
def test_a_message_naming_another_function_fails_unrun_and_unimported(
    queue: Queue,
    redis_namespace: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    canary_unloaded: None,
    function: str,
    argument: str | list[str],
) -> None:
    marker = tmp_path / "ran"
    filled = (
        [part.format(marker=marker) for part in argument]
        if isinstance(argument, list)
        else argument.format(marker=marker)
    )
    message_id = f"{redis_namespace.prefix}-evil"
    queue.enqueue(function, filled, job_id=message_id)
    with caplog.at_level(logging.WARNING, logger="app.worker"):
        run_worker(queue, redis_namespace.prefix)
    assert not marker.exists()
    assert CANARY not in sys.modules
    assert "not a task of this service" in refused(queue, message_id)
    assert f"refused rq message {message_id}" in caplog.text and repr(function) in caplog.text


def test_a_plain_rq_worker_would_have_imported_and_run_it(
    queue: Queue, redis_namespace: Any, tmp_path: Path, canary_unloaded: None
) -> None:
    # What the test above guards against: rq's own job class imports whatever is named.
    marker = tmp_path / "ran"
    queue.enqueue(f"{CANARY}.touch", str(marker), job_id=f"{redis_namespace.prefix}-plain")
    plain = SimpleWorker(
        [queue],
        connection=queue.connection,
        name=f"{redis_namespace.prefix}-worker",
        serializer=JSONSerializer,
    )
    plain.work(burst=True)
    assert marker.exists() and CANARY in sys.modules


def test_the_service_task_with_a_callback_is_refused_and_the_callback_never_runs(
    queue: Queue, redis_namespace: Any, tmp_path: Path, canary_unloaded: None
) -> None:
    marker = tmp_path / "ran"
    message_id = f"{redis_namespace.prefix}-callback"
    queue.enqueue(TASK, str(marker), job_id=message_id, on_failure=Callback(f"{CANARY}.on_failure"))
    run_worker(queue, redis_namespace.prefix)
    assert "names callbacks" in refused(queue, message_id)
    assert not marker.exists() and CANARY not in sys.modules


def test_the_service_task_with_a_webhook_is_refused_and_nothing_is_posted(
    queue: Queue, redis_namespace: Any
) -> None:
    posted: list[str] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            posted.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        message_id = f"{redis_namespace.prefix}-webhook"
        queue.enqueue(TASK, "job_x", job_id=message_id, webhooks=[Webhook(url, "failed")])
        run_worker(queue, redis_namespace.prefix)
        assert "lists webhooks" in refused(queue, message_id)
    finally:
        server.shutdown()
        server.server_close()
    assert posted == []


def test_the_service_task_still_runs(
    queue: Queue, redis_namespace: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Turn:
        def process(self, job_id: str) -> str:
            return f"finished {job_id}"

    monkeypatch.setattr(worker_module, "_current", Turn())
    message_id = f"{redis_namespace.prefix}-ours"
    queue.enqueue(TASK, "job_123", job_id=message_id)
    run_worker(queue, redis_namespace.prefix)
    message = Job.fetch(message_id, connection=queue.connection, serializer=JSONSerializer)
    assert message.get_status() == JobStatus.FINISHED
    assert message.return_value() == "finished job_123"
    # The one name the worker runs is where the task really lives.
    task = importlib.import_module(TASK.rsplit(".", 1)[0])
    assert getattr(task, TASK.rsplit(".", 1)[1]) is worker_module.process_job
