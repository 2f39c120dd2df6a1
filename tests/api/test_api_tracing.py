"""OpenTelemetry spans of an answer: the request, each stage of the answer's `timings`, and
the model call with its token counts, kept by the SDK's in-memory exporter."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from thread_server import ServerUser, serving

from app import tracing
from app.main import create_app
from tests.api.harness import api_settings
from tests.span_capture import captured_spans

pytestmark = pytest.mark.integration

NOTE = b"The QUARTZ-4471 relief valve must be inspected every 30 days by the plant engineer."


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with captured_spans() as exporter:
        yield exporter


def test_an_answer_traces_its_stages_and_the_model_call(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    settings = api_settings(tmp_path / "data", tracing="otlp")
    with serving(create_app(settings)) as server:
        reader = ServerUser(server, "harbour", "reader")
        reader.upload("valve.txt", NOTE)
        spans.clear()
        answered = reader.query("How often must the QUARTZ-4471 relief valve be inspected?").json()
        assert answered["refused"] is False, answered
    finished = spans.get_finished_spans()
    (request,) = [s for s in finished if s.name == "POST /query"]
    in_trace = [s for s in finished if s.context.trace_id == request.context.trace_id]
    stages = {s.name.removeprefix("stage ") for s in in_trace if s.name.startswith("stage ")}
    assert stages == set(answered["timings"])  # the same stages the body reports
    (llm,) = [s for s in in_trace if s.name == "llm.generate"]
    assert llm.attributes is not None
    assert llm.attributes["llm.model"] == server.container.llm.model_id
    assert int(str(llm.attributes["llm.completion_tokens"])) >= 1


def test_a_server_error_names_its_request_id_in_the_body_and_the_trace(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    settings = api_settings(tmp_path / "data", tracing="otlp")
    with serving(create_app(settings)) as server:
        container = server.container
        reader = ServerUser(server, "harbour", "reader")

        def broken(*args: object, **kwargs: object) -> object:
            raise RuntimeError("the search index exploded")

        container.__dict__["retriever"] = type("Broken", (), {"search": broken})()
        response = httpx.post(
            f"{server.url}/search",
            json={"query": "valve"},
            headers={**reader.headers, "X-Request-ID": "trace-me-500"},
        )
    assert response.status_code == 500
    assert response.json()["error"]["request_id"] == "trace-me-500"
    (request,) = [s for s in spans.get_finished_spans() if s.name == "POST /search"]
    assert request.attributes is not None
    assert request.attributes["request.id"] == "trace-me-500"
    assert request.attributes["http.response.status_code"] == 500


CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_TRACEPARENT = f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"


def _health_trace(settings_dir: Path, spans: InMemorySpanExporter, **overrides: str) -> str:
    """The trace id of the request span of one GET /health sent with a client's traceparent."""
    settings = api_settings(settings_dir, tracing="otlp", **overrides)
    with serving(create_app(settings)) as server:
        response = httpx.get(f"{server.url}/health", headers={"traceparent": CLIENT_TRACEPARENT})
        assert response.status_code == 200
    (request,) = [s for s in spans.get_finished_spans() if s.name == "GET /health"]
    return format(request.context.trace_id, "032x")


def test_a_clients_traceparent_is_ignored_when_it_is_no_trusted_proxy(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    # Anyone could otherwise pick the trace their requests land in, or flood one trace id.
    trace = _health_trace(tmp_path / "data", spans)
    assert trace != CLIENT_TRACE
    assert int(trace, 16) != 0  # a trace of its own


def test_a_trusted_proxys_traceparent_continues_its_trace(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    assert _health_trace(tmp_path / "data", spans, trusted_proxies="127.0.0.1") == CLIENT_TRACE


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver: keeps the span names of every export it is sent."""

    received: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        body = self.rfile.read(int(self.headers["Content-Length"]))
        export = ExportTraceServiceRequest.FromString(body)
        for resource in export.resource_spans:
            for scope in resource.scope_spans:
                type(self).received += [span.name for span in scope.spans]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
        assert self.path == "/v1/traces"

    def log_message(self, format: str, *args: object) -> None:
        return


def test_otlp_export_reaches_a_collector_when_the_endpoint_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collector = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{collector.server_port}")
    _Collector.received = []
    try:
        assert not tracing.enabled()
        with serving(create_app(api_settings(tmp_path / "data"))) as server:
            assert tracing.enabled()  # the endpoint alone turns tracing on
            assert httpx.get(f"{server.url}/health").status_code == 200
        # The app's end flushed the batch to the collector and turned tracing off again.
        assert "GET /health" in _Collector.received
        assert not tracing.enabled()
    finally:
        collector.shutdown()
        tracing.use_provider(None)


def test_log_lines_carry_the_request_id_and_the_trace_id(spans: InMemorySpanExporter) -> None:
    import json
    import logging

    from app.observability import JsonFormatter, request_id_var

    record = logging.makeLogRecord({"msg": "answered", "levelname": "INFO", "name": "app"})
    token = request_id_var.set("req-77")
    try:
        with tracing.span("POST /query") as span:
            assert span is not None
            line = json.loads(JsonFormatter().format(record))
    finally:
        request_id_var.reset(token)
    assert line["request_id"] == "req-77"
    assert line["trace_id"] == format(span.get_span_context().trace_id, "032x")
    tracing.use_provider(None)
    assert "trace_id" not in json.loads(JsonFormatter().format(record))
