"""A local HTTP server that answers `rag` as the service would, but slowly or never: uploads
that take long enough to watch their progress bars, or that hang until the test ends (to
interrupt `rag` in the middle of one). The live server is too fast on loopback for either."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from testkit.http_peer import QuietHandler, serving_handler


@dataclass
class StubService:
    """Lists no documents; holds each upload `answer_after_s` after reading its body (None:
    until the test ends), then accepts it as a queued job."""

    answer_after_s: float | None = 1.0
    uploads: list[str] = field(default_factory=list)  # the file names, as each upload arrives
    url: str = ""
    _released: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def uploaded(self) -> list[str]:
        """The names of the uploads that arrived so far."""
        with self._lock:
            return list(self.uploads)

    def wait_for_uploads(self, count: int, timeout_s: float = 30) -> list[str]:
        """The first `count` uploads' names, once they have arrived."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(self.uploaded()) >= count:
                return self.uploaded()
            time.sleep(0.05)
        raise AssertionError(f"{count} uploads did not arrive in {timeout_s} s: {self.uploads}")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # the listing of a sync: nothing on the service yet
                self._answer(200, {"data": [], "count": 0})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                name = _file_name(body)
                with stub._lock:
                    stub.uploads.append(name)
                stub._released.wait(stub.answer_after_s)
                number = len(stub.uploads)
                self._answer(
                    202,
                    {
                        "job_id": f"job_{number:024d}",
                        "document_id": f"doc_{number:024d}",
                        "status": "queued",
                        "source": name,
                    },
                )

            def _answer(self, status: int, document: dict[str, Any]) -> None:
                self.send_body(status, "application/json", json.dumps(document).encode())

        return Handler

    @contextmanager
    def running(self) -> Iterator[StubService]:
        """Serve on 127.0.0.1 for the block; uploads still held are then answered."""
        with serving_handler(self._handler()) as server:
            self.url = f"http://127.0.0.1:{server.server_port}"
            try:
                yield self
            finally:
                self._released.set()  # before the server stops: held uploads are answered


def _file_name(body: bytes) -> str:
    """The file name of a multipart upload's `file` part."""
    marker = b'name="file"; filename="'
    start = body.find(marker)
    if start < 0:
        return ""
    start += len(marker)
    return body[start : body.index(b'"', start)].decode()
