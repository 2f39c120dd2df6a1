"""A real HTTP peer for tests: a request handler served on a free loopback port by a background
thread (a scripted model server, a telemetry collector, a service that answers busy)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that logs nothing and answers with one call."""

    def send_body(
        self, status: int, content_type: str, body: bytes, headers: Mapping[str, str] | None = None
    ) -> None:
        """Answer `status` with `body` of `content_type` (its length given) and `headers`."""
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving_handler(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    """Serve `handler` on 127.0.0.1 (a free port: `server.server_port`) while the block runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
