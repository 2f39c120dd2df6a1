"""OpenTelemetry traces: a span for each request, answer stage, model call and ingestion job
stage, with the trace carried across the job queue (README "Monitoring").

Off unless RAG_TRACING=otlp or OTEL_EXPORTER_OTLP_ENDPOINT is set. While off, the SDK is never
imported and `span()` hands back one shared do-nothing context manager: one flag check per call.
LangSmith (app/observability.py) is independent and may run alongside.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from app.config import Settings

SERVICE_NAME = "rag-service"
_NOTHING: nullcontext[None] = nullcontext()
_tracer: Tracer | None = None
_provider: TracerProvider | None = None


def wanted(settings: Settings) -> bool:
    """Whether settings or the OTEL_* environment ask for traces."""
    return settings.tracing == "otlp" or bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def configure(settings: Settings) -> bool:
    """Export spans over OTLP/HTTP when asked (the SDK reads OTEL_EXPORTER_OTLP_* itself)."""
    if not wanted(settings) or _tracer is not None:
        return _tracer is not None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME", SERVICE_NAME)
    provider = SdkTracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    use_provider(provider)
    return True


def use_provider(provider: TracerProvider | None) -> None:
    """Trace through `provider` from now on (None: off). Tests pass an SDK provider whose
    exporter keeps spans in memory."""
    global _tracer, _provider
    _provider = provider
    _tracer = None if provider is None else provider.get_tracer(SERVICE_NAME)


def shutdown() -> None:
    """Send the spans still batched and stop tracing (at the end of a process)."""
    provider = _provider
    use_provider(None)
    stop = getattr(provider, "shutdown", None)
    if stop is not None:
        stop()


def enabled() -> bool:
    """Whether spans are being recorded."""
    return _tracer is not None


def span(name: str, **attributes: Any) -> AbstractContextManager[Span | None]:
    """A span around a block, child of the current one (a shared no-op while off)."""
    tracer = _tracer
    if tracer is None:
        return _NOTHING
    return tracer.start_as_current_span(name, attributes=_clean(attributes))


def start(name: str, **attributes: Any) -> Span | None:
    """A span that the caller ends with `finish` (for work spread over a generator)."""
    tracer = _tracer
    if tracer is None:
        return None
    return tracer.start_span(name, attributes=_clean(attributes))


def finish(started: Span | None, **attributes: Any) -> None:
    """Add attributes to a span from `start` and end it."""
    if started is None:
        return
    started.set_attributes(_clean(attributes))
    started.end()


def current_trace_id() -> str | None:
    """The current trace's id in hex (for log lines), or None while off or outside a span."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def carrier() -> dict[str, str]:
    """The current trace as W3C `traceparent` headers, to send along with queued work."""
    if _tracer is None:
        return {}
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    headers: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(headers)
    return headers


@contextmanager
def continued(headers: Mapping[str, str], name: str, **attributes: Any) -> Iterator[Span | None]:
    """A span continuing the trace in `headers` (a request's, or a queued job's carrier)."""
    tracer = _tracer
    if tracer is None:
        yield None
        return
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    parent = TraceContextTextMapPropagator().extract(dict(headers)) if headers else None
    with tracer.start_as_current_span(
        name, context=parent, attributes=_clean(attributes)
    ) as current:
        yield current


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Attribute keys in OpenTelemetry's dotted style (`llm__prompt_tokens` ->
    `llm.prompt_tokens`), without the None values."""
    return {key.replace("__", "."): v for key, v in attributes.items() if v is not None}
