"""Prometheus metrics of the service: the names dashboards and alerts rely on (README
"Monitoring"), and the small functions every layer records through.

Off by default: until `enable()` runs, `prometheus_client` is not even imported and every
recorder returns at its first line, so a process without metrics pays one flag check per call.
With PROMETHEUS_MULTIPROC_DIR set, every process (uvicorn workers, rq workers) writes its values
to files in that directory and one scrape of any of them sums them all.

Labels are bounded: routes are templates, outcomes, stages, reasons and queues are fixed words.
No tenant, user, document or question appears in a label, except the tenants an operator names
in RAG_METRICS_TENANT_LABEL (every other tenant counts as "other").
"""

from __future__ import annotations

import glob
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Literal

from app.domain import QueueBacklog

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

# Answer outcomes (rag_answers_total{outcome}).
ANSWERED = "answered"
REFUSED_BY_GATE = "refused_gate"
REFUSED_BY_MODEL = "refused_model"
CACHE_HIT = "cache_hit"
ERROR = "error"

# Seconds; answers take from milliseconds (a cache hit) to a minute (a long local generation).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80)
JOB_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)

GaugeMode = Literal["livesum", "max"]
QueueProbe = Callable[[], Mapping[str, QueueBacklog]]  # by queue


@dataclass
class _Metrics:
    """The metric objects, created once by `enable`."""

    registry: CollectorRegistry | None  # the registry to expose; None when multiprocess
    multiprocess_dir: str | None
    tenants: frozenset[str]
    http_requests: Any
    http_duration: Any
    stage_duration: Any
    answers: Any
    answer_duration: Any
    first_token: Any
    llm_tokens: Any
    admission_waiting: Any
    admission_in_flight: Any
    admission_refused: Any
    jobs: Any
    job_duration: Any
    cache_requests: Any
    feedback: Any
    ingested_pages: Any
    ingested_chunks: Any
    build_info: Any
    process_start: Any
    worker_heartbeat: Any
    sso_signins: Any
    sso_jwks_refreshes: Any


_metrics: _Metrics | None = None
_queue_probe: QueueProbe | None = None
_lock = threading.Lock()


def enabled() -> bool:
    """Whether metrics are being recorded in this process."""
    return _metrics is not None


def process_identifier() -> str:
    """Names this process's files in the multiprocess directory: host and pid, so processes of
    several containers sharing one directory never write each other's files."""
    return f"{socket.gethostname()}-{os.getpid()}"


def enable(tenants: frozenset[str] = frozenset()) -> None:
    """Create the metrics (idempotent); multiprocess when PROMETHEUS_MULTIPROC_DIR is set."""
    global _metrics
    with _lock:
        if _metrics is None:
            _metrics = _create(tenants)
            _metrics.process_start.set(time.time())


def disable() -> None:
    """Stop recording in this process (benchmarks compare on and off in one process)."""
    global _metrics
    with _lock:
        _metrics = None


def _create(tenants: frozenset[str]) -> _Metrics:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, values

    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None
    registry: CollectorRegistry | None = CollectorRegistry(auto_describe=True)
    kwargs: dict[str, Any] = {"registry": registry}
    if directory:
        os.makedirs(directory, exist_ok=True)
        values.ValueClass = values.MultiProcessValue(process_identifier)  # type: ignore[no-untyped-call]
        _forget_dead_processes(directory)
        registry = None
        kwargs = {"registry": None}  # values live in files; the collector reads them all
    answer_labels = ("outcome", "tenant") if tenants else ("outcome",)

    def gauge(name: str, doc: str, labels: tuple[str, ...], mode: GaugeMode) -> Any:
        return Gauge(name, doc, labels, multiprocess_mode=mode, **kwargs)

    return _Metrics(
        registry=registry,
        multiprocess_dir=directory,
        tenants=tenants,
        http_requests=Counter(
            "rag_http_requests", "HTTP requests answered", ("route", "method", "status"), **kwargs
        ),
        http_duration=Histogram(
            "rag_http_request_duration_seconds",
            "Time to the response's headers",
            ("route", "method"),
            buckets=LATENCY_BUCKETS,
            **kwargs,
        ),
        stage_duration=Histogram(
            "rag_stage_duration_seconds",
            "Time of one answer's stage (the stages of the answer's `timings`)",
            ("stage",),
            buckets=LATENCY_BUCKETS,
            **kwargs,
        ),
        answers=Counter("rag_answers", "Answers by how they ended", answer_labels, **kwargs),
        answer_duration=Histogram(
            "rag_answer_duration_seconds",
            "One answer from the request to its last word (streamed or not), by outcome",
            ("outcome",),
            buckets=LATENCY_BUCKETS,
            **kwargs,
        ),
        first_token=Histogram(
            "rag_llm_time_to_first_token_seconds",
            "From asking the model to its first streamed piece",
            buckets=LATENCY_BUCKETS,
            **kwargs,
        ),
        llm_tokens=Counter(
            "rag_llm_tokens", "Tokens read (prompt) and written (completion)", ("kind",), **kwargs
        ),
        admission_waiting=gauge(
            "rag_admission_waiting", "Callers queued for a slot", ("lane",), "livesum"
        ),
        admission_in_flight=gauge("rag_admission_in_flight", "Slots held", ("lane",), "livesum"),
        admission_refused=Counter(
            "rag_admission_refused",
            "Requests refused for load (429 own user or tenant, 503 server busy)",
            ("lane", "reason"),
            **kwargs,
        ),
        jobs=Counter("rag_jobs", "Ingestion jobs by how they ended", ("outcome",), **kwargs),
        job_duration=Histogram(
            "rag_job_duration_seconds",
            "Time of one ingestion job's stage (total: the whole job)",
            ("stage",),
            buckets=JOB_BUCKETS,
            **kwargs,
        ),
        cache_requests=Counter(
            "rag_cache_requests", "Answer cache look-ups", ("result",), **kwargs
        ),
        feedback=Counter("rag_feedback", "Ratings of answers", ("rating",), **kwargs),
        ingested_pages=Counter("rag_ingested_pages", "Pages indexed", **kwargs),
        ingested_chunks=Counter("rag_ingested_chunks", "Chunks indexed", **kwargs),
        sso_signins=Counter(
            "rag_sso_signins",
            "Single sign-on sign-ins and provider tokens on the API, by outcome",
            ("outcome",),
            **kwargs,
        ),
        sso_jwks_refreshes=Counter(
            "rag_sso_jwks_refreshes",
            "Fetches of identity providers' signing keys (ok or failed)",
            ("outcome",),
            **kwargs,
        ),
        build_info=gauge(
            "rag_build_info",
            "The running version and its models (always 1)",
            ("version", "embedder", "llm_provider"),
            "max",
        ),
        process_start=gauge(
            "rag_process_start_time_seconds",
            "When the newest process of the service started (Unix time): a deploy or restart",
            (),
            "max",
        ),
        worker_heartbeat=gauge(
            "rag_worker_heartbeat_timestamp_seconds",
            "When an ingestion worker last reached its queue and job table (Unix time)",
            (),
            "max",
        ),
    )


def _forget_dead_processes(directory: str) -> None:
    """Drop the live gauges of this host's processes that are gone (a crashed worker's
    in-flight count must not stay in the sum)."""
    from prometheus_client import multiprocess

    host = socket.gethostname()
    for path in glob.glob(os.path.join(directory, f"gauge_live*_{host}-*.db")):
        pid = path.rsplit("-", 1)[1].removesuffix(".db")
        if pid.isdigit() and not _alive(int(pid)):
            multiprocess.mark_process_dead(f"{host}-{pid}", directory)  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exposition() -> tuple[bytes, str]:
    """The text a scrape gets (all processes' values in multiprocess mode), and its type."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    metrics = _metrics
    if metrics is None:
        raise RuntimeError("metrics are not enabled in this process")
    _probe_queues(metrics)
    registry = metrics.registry
    if registry is None:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=metrics.multiprocess_dir)  # type: ignore[no-untyped-call]
    return generate_latest(registry), CONTENT_TYPE_LATEST


def serve_on_port(port: int, host: str) -> ThreadingHTTPServer | None:
    """Serve the exposition on host:port (no token: keep the port off the gateway); None
    when another process of this host already does (uvicorn --workers: the first one wins,
    and its scrape sums them all). Stop it with `.shutdown()`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body, content_type = exposition()
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # scrapes every few seconds would flood the log

    try:
        server = ThreadingHTTPServer((host, port), Handler)
    except OSError:
        return None
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
    thread.start()
    return server


# --- queue depth: read at scrape time from whoever knows it ---


def watch_queues(probe: QueueProbe) -> None:
    """Register how to read the job queues' depth and oldest age (called at each scrape)."""
    global _queue_probe
    _queue_probe = probe


def _probe_queues(metrics: _Metrics) -> None:
    from prometheus_client import Gauge

    probe = _queue_probe
    if probe is None:
        return
    with _lock:
        gauges = getattr(metrics, "_queue_gauges", None)
        if gauges is None:
            kwargs: dict[str, Any] = {"registry": metrics.registry}
            queued = Gauge(
                "rag_jobs_queued",
                "Jobs waiting for a worker",
                ("queue",),
                multiprocess_mode="mostrecent",
                **kwargs,
            )
            age = Gauge(
                "rag_jobs_oldest_queued_age_seconds",
                "How long the oldest waiting job has waited",
                ("queue",),
                multiprocess_mode="mostrecent",
                **kwargs,
            )
            gauges = (queued, age)
            metrics._queue_gauges = gauges  # type: ignore[attr-defined]
    try:
        depths = probe()
    except Exception:  # a scrape must not fail because the queue's store is briefly away
        return
    for queue, backlog in depths.items():
        gauges[0].labels(queue).set(backlog.queued)
        gauges[1].labels(queue).set(backlog.oldest_wait_s)


# --- recorders: each a no-op while metrics are off ---


def _count(counter: Callable[[_Metrics], Any], *labels: str) -> None:
    """One more on the labelled counter `counter` picks, when metrics are on."""
    metrics = _metrics
    if metrics is not None:
        counter(metrics).labels(*labels).inc()


def http_request(route: str, method: str, status: int, seconds: float) -> None:
    """One answered HTTP request; `route` is the template (`/documents/{document_id}`)."""
    metrics = _metrics
    if metrics is None:
        return
    metrics.http_requests.labels(route, method, str(status)).inc()
    metrics.http_duration.labels(route, method).observe(seconds)


def answer(
    outcome: str, tenant_id: str, stages_ms: Mapping[str, float], total_ms: float = 0.0
) -> None:
    """One finished answer: how it ended, its stage timings and its whole time (milliseconds,
    as the answer's `timings` and `total_ms`)."""
    metrics = _metrics
    if metrics is None:
        return
    metrics.answer_duration.labels(outcome).observe(total_ms / 1000.0)
    if metrics.tenants:
        tenant = tenant_id if tenant_id in metrics.tenants else "other"
        metrics.answers.labels(outcome, tenant).inc()
    else:
        metrics.answers.labels(outcome).inc()
    for stage, ms in stages_ms.items():
        metrics.stage_duration.labels(stage).observe(ms / 1000.0)


def cache_request(hit: bool) -> None:
    """One answer-cache look-up."""
    _count(lambda m: m.cache_requests, "hit" if hit else "miss")


def feedback(rating: str) -> None:
    """A person rated an answer (`up` or `down`; a changed rating counts again)."""
    _count(lambda m: m.feedback, rating)


def llm_first_token(seconds: float) -> None:
    """Time from asking the model to its first streamed piece."""
    metrics = _metrics
    if metrics is not None:
        metrics.first_token.observe(seconds)


def llm_tokens(prompt: int | None, completion: int) -> None:
    """Tokens of one generation (the prompt's when the provider reports it)."""
    metrics = _metrics
    if metrics is None:
        return
    if prompt:
        metrics.llm_tokens.labels("prompt").inc(prompt)
    if completion:
        metrics.llm_tokens.labels("completion").inc(completion)


def admission(lane: str, waiting: int, in_flight: int) -> None:
    """This process's queue and running slots of one admission lane, after a change."""
    metrics = _metrics
    if metrics is None:
        return
    metrics.admission_waiting.labels(lane).set(waiting)
    metrics.admission_in_flight.labels(lane).set(in_flight)


def admission_refused(lane: str, reason: str) -> None:
    """One request refused for load; reason "user_or_tenant" (429) or "server_busy" (503)."""
    _count(lambda m: m.admission_refused, lane, reason)


def sso_signin(outcome: str) -> None:
    """One single sign-on attempt ended: "ok", or the reason it was refused."""
    _count(lambda m: m.sso_signins, outcome)


def sso_jwks_refresh(outcome: str) -> None:
    """One fetch of a provider's signing keys: "ok" or "failed"."""
    _count(lambda m: m.sso_jwks_refreshes, outcome)


def job_finished(outcome: str, seconds: float | None = None) -> None:
    """One ingestion job ended: "done", "failed" or "retried" (put back after a transient
    failure); `seconds` is the whole job's time when it ran alone."""
    metrics = _metrics
    if metrics is None:
        return
    metrics.jobs.labels(outcome).inc()
    if seconds is not None:
        job_duration(seconds)


def job_duration(seconds: float) -> None:
    """The whole time of one job that ran alone (stage "total")."""
    job_stage("total", seconds)


def job_stage(stage: str, seconds: float) -> None:
    """One stage of an ingestion job: parse, embed, store."""
    metrics = _metrics
    if metrics is not None:
        metrics.job_duration.labels(stage).observe(seconds)


@contextmanager
def job_stage_timer(stage: str) -> Iterator[None]:
    """Time one stage of an ingestion job (parse, embed, store) when metrics are on."""
    if _metrics is None:
        yield
        return
    started = time.perf_counter()
    try:
        yield
    finally:
        job_stage(stage, time.perf_counter() - started)


def ingested(pages: int, chunks: int) -> None:
    """A document indexed: its pages and chunks."""
    metrics = _metrics
    if metrics is None:
        return
    metrics.ingested_pages.inc(pages)
    metrics.ingested_chunks.inc(chunks)


def build_info(version: str, embedder: str, llm_provider: str) -> None:
    """The running version and models, as labels of a gauge that is always 1."""
    metrics = _metrics
    if metrics is not None:
        metrics.build_info.labels(version, embedder, llm_provider).set(1)


def worker_heartbeat(unix_time: float) -> None:
    """An ingestion worker is alive and reached its stores."""
    metrics = _metrics
    if metrics is not None:
        metrics.worker_heartbeat.set(unix_time)
