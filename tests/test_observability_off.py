"""Metrics and traces cost nothing while off: importing and building the app, and every
recorder a request calls, load neither prometheus_client nor the OTLP exporter (chromadb loads
the OpenTelemetry SDK for itself; no tracer of ours is made)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]

PROGRAM = """
import sys
from app import metrics, tracing
from app.main import create_app
from app.timing import start_timer, timed
import app.worker

create_app()
start_timer()
with timed("dense"), tracing.span("x"):
    metrics.http_request("/search", "POST", 200, 0.01)
    metrics.answer(metrics.ANSWERED, "acme", {"dense": 1.0})
    metrics.cache_request(True)
assert not metrics.enabled() and not tracing.enabled() and tracing.carrier() == {}
print(sorted(m for m in sys.modules if m.startswith(("prometheus_client",
      "opentelemetry.exporter.otlp.proto.http"))))
"""


def test_nothing_of_metrics_or_tracing_loads_while_they_are_off() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "RAG_JWT_SECRET": "x" * 40},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
