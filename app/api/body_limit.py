"""A cap on request bodies that holds before routing, parsing and authentication.

FastAPI reads a JSON or form body completely before any dependency (authentication included)
runs, so without this an anonymous client could make the API process buffer any amount. The
cap is checked against Content-Length up front and counted as the body arrives (chunked bodies
have no Content-Length), and a refused request gets a 413 in the shared error envelope. Only
`POST /documents` may send more: the upload limit plus multipart framing; the upload route
streams that to disk itself.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import error_response
from app.api.http_middleware import HttpMiddleware
from app.api.upload import too_large, upload_body_cap
from app.config import Settings

UPLOAD_ROUTE = ("POST", "/documents")
# An evaluation set of up to 1,000 questions, as JSON or an uploaded JSONL / CSV file.
EVALUATION_SET_ROUTES = (("POST", "/evaluations/sets"), ("POST", "/evaluations/sets/upload"))
EVALUATION_SET_BYTES = 4 * 1024 * 1024


class BodyTooLarge(Exception):
    """Raised from `receive` once a body passes its cap (the middleware answers 413)."""


def route_path(scope: Scope) -> str:
    """The request path without the root path a gateway or setting put in front of it."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) :][:1] in ("", "/"):
        return path[len(root) :] or "/"
    return path


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class BodySizeLimit(HttpMiddleware):
    """Pure ASGI middleware: 413 for a body over its route's cap, without reading the rest."""

    def __init__(self, app: ASGIApp, settings: Callable[[], Settings]) -> None:
        super().__init__(app)
        active = settings()
        self.max_body_bytes = active.max_body_bytes
        self.max_upload_bytes = active.max_upload_bytes

    def _cap(self, scope: Scope) -> int:
        """The largest body this request may send."""
        route = (scope["method"], route_path(scope))
        if route == UPLOAD_ROUTE:
            return upload_body_cap(self.max_upload_bytes)
        if route in EVALUATION_SET_ROUTES:
            return max(self.max_body_bytes, EVALUATION_SET_BYTES)
        return self.max_body_bytes

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, cap: int) -> None:
        """Answer 413 (built only for a refused request, not for every one)."""
        if (scope["method"], route_path(scope)) == UPLOAD_ROUTE:
            message = too_large(self.max_upload_bytes).message
        else:
            message = f"the request body is larger than the limit of {cap} bytes"
        # "Connection: close": the client is still sending; this answer ends the exchange.
        refusal = error_response(413, "payload_too_large", message, {"Connection": "close"})
        await refusal(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        cap = self._cap(scope)
        declared = _declared_length(scope)
        if declared is not None and declared > cap:
            await self._refuse(scope, receive, send, cap)
            return

        received = 0
        refused = False
        started = False

        async def counting_receive() -> Message:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > cap:
                    refused = True
                    raise BodyTooLarge(f"body passed {cap} bytes")
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:  # whatever the app makes of a cut-off body, the client gets the 413
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not refused:
                raise
        if refused and not started:
            await self._refuse(scope, receive, send, cap)
