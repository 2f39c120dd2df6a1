"""Who the client is and where the service lives, when a gateway sits in front of it.

`X-Forwarded-For`, `X-Forwarded-Proto` and `X-Forwarded-Prefix` are believed only when the
direct peer is one of `RAG_TRUSTED_PROXIES`; from anyone else they are ignored, so a client
cannot pick the IP its login attempts are counted under. uvicorn's ProxyHeadersMiddleware does
the For/Proto part (walking the For chain from the right, skipping trusted hops); this adds the
path prefix: `RAG_ROOT_PATH`, or a trusted proxy's `X-Forwarded-Prefix`, becomes the ASGI
`root_path`, so the OpenAPI servers URL, /docs and redirects carry the prefix the client used.

A W3C trace context (`traceparent`, `tracestate`) is believed from the same trusted proxies
only: from any other peer it is dropped and the request starts a trace of its own, so an outside
client can neither join its requests to a trace it picked nor fill a trace store under one id.

An `X-Forwarded-For` arriving while no proxy is trusted usually means a gateway nobody told the
service about: every client behind it then shares the gateway's address (one login and query
budget for all). That is logged once, at first sight, as a warning naming the setting.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app.config import Settings

log = logging.getLogger(__name__)

_MAX_PREFIX_CHARS = 256
_TRACE_CONTEXT_HEADERS = (b"traceparent", b"tracestate")


def _clean_prefix(raw: bytes) -> str | None:
    """A forwarded path prefix without its trailing slash, or None when it is not a plain path."""
    try:
        prefix = raw.decode("ascii").strip().rstrip("/")
    except UnicodeDecodeError:
        return None
    plain = prefix.startswith("/") and "//" not in prefix and prefix.isprintable()
    if not plain or len(prefix) > _MAX_PREFIX_CHARS or any(c in prefix for c in "?#\\ "):
        return None
    return prefix


class ForwardedHeaders:
    """Pure ASGI middleware: client address, scheme and root path from trusted proxies."""

    def __init__(self, app: ASGIApp, settings: Callable[[], Settings]) -> None:
        active = settings()
        self.root_path = active.root_path
        self.trusted = [ipaddress.ip_network(p, strict=False) for p in active.trusted_proxy_list]
        self.app = app
        # One app per server process: warning once per instance is once per process.
        self.warned_untrusted_forward = False
        # With no trusted proxy the forwarded headers are never read at all.
        self.downstream: ASGIApp = app
        if self.trusted:
            proxy = ProxyHeadersMiddleware(app, trusted_hosts=active.trusted_proxy_list)  # type: ignore[arg-type]
            self.downstream = proxy  # type: ignore[assignment]

    def _from_trusted_proxy(self, scope: Scope) -> bool:
        client = scope.get("client")
        if not client or not self.trusted:
            return False
        try:
            peer = ipaddress.ip_address(client[0])
        except ValueError:
            return False
        return any(peer in network for network in self.trusted)

    def _warn_if_forwarded(self, scope: Scope) -> None:
        if not any(name == b"x-forwarded-for" for name, _ in scope["headers"]):
            return
        self.warned_untrusted_forward = True
        client = scope.get("client")
        log.warning(
            "a request from %s carries X-Forwarded-For, but RAG_TRUSTED_PROXIES is empty: the "
            "header is ignored and every client behind that peer shares its address for rate "
            "limits; if the peer is your gateway, add it to RAG_TRUSTED_PROXIES "
            "(logged once per process)",
            client[0] if client else "an unknown peer",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if not self.trusted and not self.warned_untrusted_forward:
            self._warn_if_forwarded(scope)
        root = self.root_path
        if self._from_trusted_proxy(scope):
            for name, value in scope["headers"]:
                if name == b"x-forwarded-prefix":
                    root = _clean_prefix(value) or root
                    break
        else:
            scope = _without_trace_context(scope)
        if root:
            scope = dict(scope)
            scope["root_path"] = root
            path: str = scope["path"]
            # ASGI paths include the root path; a gateway that strips the prefix sends /search.
            if not (path == root or path.startswith(root + "/")):
                scope["path"] = root + path
                scope["raw_path"] = root.encode("ascii") + (scope.get("raw_path") or path.encode())
        await self.downstream(scope, receive, send)


def _without_trace_context(scope: Scope) -> Scope:
    """The scope without a client's trace context headers (the same scope when it has none)."""
    headers = scope["headers"]
    if not any(name in _TRACE_CONTEXT_HEADERS for name, _ in headers):
        return scope
    scope = dict(scope)
    scope["headers"] = [(n, v) for n, v in headers if n not in _TRACE_CONTEXT_HEADERS]
    return scope
