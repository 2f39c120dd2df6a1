"""The FastAPI application (`app.main:app`): routers, error body, request ids, lifespan."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import Message, Receive, Scope, Send

from app import metrics, tracing
from app.api.access import authorize, check_route_table
from app.api.body_limit import BodySizeLimit
from app.api.errors import error_responses, install_error_handlers, internal_error_response
from app.api.forwarded import ForwardedHeaders
from app.api.http_middleware import HttpMiddleware
from app.api.known_query import refuse_unknown_query
from app.api.openapi import install_openapi_limits
from app.api.routes import (
    account,
    answers,
    audit,
    collections,
    conversations,
    documents,
    evaluations,
    feedback,
    groups,
    openai_compat,
    pages,
    public,
    scrape,
    sso,
    stats,
    users,
    webhooks,
)
from app.api.routes.web import install_web
from app.api.security_headers import NoSniff
from app.config import SERVICE_VERSION, Settings, get_settings, warn_of_unknown_settings
from app.container import Container
from app.observability import configure_logging, configure_tracing, request_id_var
from app.providers.types import ProviderOverrides

log = logging.getLogger("app.http")

_REQUEST_ID_HEADER = "X-Request-ID"


def _safe_request_id(raw: str | None) -> str:
    """Echo a client's request id only when it is short and printable; otherwise make one."""
    if raw and len(raw) <= 64 and raw.isascii() and raw.isprintable():
        return raw
    return secrets.token_hex(8)


def route_template(scope: Scope) -> str:
    """The matched route's template (`/documents/{document_id}`), never the raw path: a metric
    label must not grow with every id. Unmatched paths share one label."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


class RequestContext(HttpMiddleware):
    """Pure ASGI middleware: the request id (header, log lines, the 500's body), the request's
    span, its metric and its log line. Pure ASGI rather than `@app.middleware("http")`
    (Starlette's BaseHTTPMiddleware), which runs every request in a task group of its own with
    the body passed through memory streams: a fixed cost on each of many small uploads."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        method = scope["method"]
        request_id = _safe_request_id(headers.get(_REQUEST_ID_HEADER))
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = 500
        elapsed: float | None = None  # until the response's headers, as the log always measured

        async def send_with_id(message: Message) -> None:
            nonlocal status, elapsed
            if message["type"] == "http.response.start":
                status = message["status"]
                elapsed = time.perf_counter() - started
                MutableHeaders(scope=message)[_REQUEST_ID_HEADER] = request_id
            await send(message)

        # A `traceparent` continues its trace (ForwardedHeaders has dropped it unless a trusted
        # proxy sent it); the span carries the request id.
        with tracing.continued(headers, f"{method} request", request__id=request_id) as span:
            try:
                await self.app(scope, receive, send_with_id)
            except Exception:
                # Answered here rather than by Starlette's outermost handler, so the 500 carries
                # the request id in its body and header, and the log line has it too.
                log.exception("unhandled error", extra={"request_id": request_id})
                if elapsed is not None:
                    raise  # the response has begun: nothing else can be sent on it
                await internal_error_response()(scope, receive, send_with_id)
            finally:
                request_id_var.reset(token)
            route = route_template(scope)
            if span is not None:
                span.update_name(f"{method} {route}")
                span.set_attributes({"http.route": route, "http.response.status_code": status})
        took = elapsed if elapsed is not None else time.perf_counter() - started
        if metrics.enabled():
            metrics.http_request(route, method, status, took)
        log.info(
            "request",
            extra={
                "request_id": request_id,
                "method": method,
                "path": scope["path"],
                "status": status,
                "ms": round(took * 1000, 2),
            },
        )


def start_metrics(settings: Settings, container: Container) -> Callable[[], None]:
    """Record metrics in this process, and serve them on their own port when configured;
    returns what stops that port's server."""
    metrics.enable(settings.metrics_tenants)
    metrics.build_info(SERVICE_VERSION, container.embedder.model_id, settings.llm_provider)
    metrics.watch_queues(container.queue_depths)
    port, host = settings.metrics_port, settings.metrics_bind_host
    server = metrics.serve_on_port(port, host) if port else None
    if server is None:
        return lambda: None
    log.info("metrics served", extra={"host": host, "port": port})

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return stop


def create_app(
    settings: Settings | None = None,
    *,
    start_workers: bool = True,
    providers: ProviderOverrides | None = None,
) -> FastAPI:
    """Build the application; components load in the lifespan, not at import time.
    `providers` replaces the configured embedder or LLM (tests' fakes; see `Container`)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        active = settings or get_settings()
        configure_logging(active.log_level)
        warn_of_unknown_settings(log)
        configure_tracing(active)  # LangSmith, when asked
        tracing_was_on = tracing.enabled()  # a test's own provider is left to the test
        own_tracing = tracing.configure(active) and not tracing_was_on  # OpenTelemetry
        container = Container(active, providers)
        app.state.container = container
        app.state.ready = False
        container.warm_up(serving=True)
        workers = container.job_queue  # threads pool, or a Redis queue for workers
        stop_metrics = start_metrics(active, container) if active.metrics_enabled else None
        # Webhook events go out from the process that runs jobs: this one with `threads`.
        deliveries = container.webhook_dispatcher if active.job_backend == "threads" else None
        if start_workers:
            workers.start()  # first: the threads pool re-queues what a crash left processing
            # With Redis, workers run evaluations but those that answer (this one's admission).
            redis_backend = active.job_backend == "redis"
            container.evaluation_runner.start(
                asyncio.get_running_loop(), "api" if redis_backend else "evaluations"
            )
            if deliveries is not None:
                deliveries.start()
        app.state.ready = True
        log.info("service ready", extra={"embedder": container.embedder.model_id})
        try:
            yield
        finally:
            app.state.ready = False
            if stop_metrics is not None:
                stop_metrics()
            workers.stop()
            if start_workers:  # a run stopped midway goes back to the queue
                container.evaluation_runner.stop()
            if deliveries is not None:
                deliveries.stop()
            container.close()
            if own_tracing:
                tracing.shutdown()  # the batched spans go out before the process ends

    app = FastAPI(
        title="RAG service",
        version=SERVICE_VERSION,
        description="Multi-tenant retrieval-augmented answers with page-level citations.",
        lifespan=lifespan,
        docs_url=None,  # served offline by install_web, when RAG_DOCS_ENABLED allows
        redoc_url=None,
    )
    install_error_handlers(app)
    install_openapi_limits(app, lambda: settings or get_settings())
    # Middleware added later wraps what was added before: the forwarded headers are read
    # first, then the request gets its id, then the body cap holds before any route runs.
    app.add_middleware(BodySizeLimit, settings=lambda: settings or get_settings())

    app.add_middleware(RequestContext)

    app.add_middleware(ForwardedHeaders, settings=lambda: settings or get_settings())
    app.add_middleware(NoSniff)  # outermost: every response has it, a 413 or a 500 too
    app.include_router(public.router)
    app.include_router(sso.public_router)
    app.include_router(scrape.router)  # its own bearer token (RAG_METRICS_TOKEN)
    # Authenticated by default, and each route's minimum role checked (app/api/access.py).
    # Unknown query parameters are refused after authentication (a 401 comes first), except
    # on the OpenAI-compatible routes, which ignore what OpenAI's clients send and they do not read.
    protected = [Depends(authorize)]
    strict = [*protected, Depends(refuse_unknown_query)]
    routers = (
        documents.router,
        answers.router,
        stats.router,
        pages.router,
        conversations.router,
        openai_compat.router,
        account.router,
        users.router,
        audit.router,
        feedback.router,
        evaluations.router,
        sso.admin_router,
        webhooks.router,
        collections.router,
        groups.router,
    )
    for router in routers:
        checks = protected if router is openai_compat.router else strict
        app.include_router(router, dependencies=checks, responses=error_responses(401))
    install_web(app)  # the web app at / and the offline /docs, /redoc
    check_route_table(app)
    return app


app = create_app()
