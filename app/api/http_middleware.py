"""The base of the service's pure ASGI middlewares that act on HTTP requests only."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send


class HttpMiddleware:
    """Pure ASGI middleware: `handle` sees each HTTP request; lifespan and websocket messages
    pass by untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The HTTP request's exchange, passed on to `self.app`."""
        raise NotImplementedError
