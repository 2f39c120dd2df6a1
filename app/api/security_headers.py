"""`X-Content-Type-Options: nosniff` on every response: JSON, errors, page pictures, SSE, the
web app's static files and the docs.

Without it a browser may sniff a response into another type than the one declared (a stored
document's text rendered as HTML, a PNG route's body run as a script), so a tenant's upload
could become active content on this origin. Set in one place, so no route can forget it; a
route that already sets the header (the web app page) keeps its own value.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import Message, Receive, Scope, Send

from app.api.http_middleware import HttpMiddleware

NOSNIFF = ("X-Content-Type-Options", "nosniff")


class NoSniff(HttpMiddleware):
    """Pure ASGI middleware: adds `X-Content-Type-Options: nosniff` to every HTTP response."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).setdefault(*NOSNIFF)
            await send(message)

        await self.app(scope, receive, send_with_header)
