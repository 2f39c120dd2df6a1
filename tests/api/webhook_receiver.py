"""A real HTTP endpoint for webhook tests: verifies Standard Webhooks signatures as a receiver
would (the snippet of docs/api.md), answers what the test says, and can go down and come back
on the same port."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def verify(secret: str, headers: dict[str, str], body: bytes, tolerance_s: int = 300) -> bool:
    """Whether the body was signed with the secret (and recently)."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    message_id = headers["webhook-id"]
    timestamp = headers["webhook-timestamp"]
    if abs(time.time() - int(timestamp)) > tolerance_s:
        return False
    signed = f"{message_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(
        hmac.compare_digest(expected, part.split(",", 1)[1])
        for part in headers["webhook-signature"].split()
        if part.startswith("v1,")
    )


@dataclass
class Received:
    """One request the receiver got."""

    headers: dict[str, str]
    body: dict[str, Any]
    signed: bool
    answered: int


@dataclass
class Receiver:
    """Listens on 127.0.0.1; `status` is what it answers; `secret` what it verifies with."""

    port: int = 0
    status: int = 200
    secret: str = ""
    requests: list[Received] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                signed = bool(receiver.secret) and verify(receiver.secret, headers, raw)
                status = receiver.status
                with receiver._lock:
                    receiver.requests.append(Received(headers, json.loads(raw), signed, status))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening (connections are refused until `start` again, same port)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def delivered(self, event_type: str | None = None) -> list[Received]:
        """The requests answered 2xx (of one event type)."""
        with self._lock:
            return [
                r
                for r in self.requests
                if 200 <= r.answered < 300 and (event_type is None or r.body["type"] == event_type)
            ]

    def wait_for(self, event_type: str, count: int = 1, timeout_s: float = 60) -> list[Received]:
        """The first `count` delivered events of a type, waiting for them."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.delivered(event_type)
            if len(found) >= count:
                return found
            time.sleep(0.1)
        raise AssertionError(f"no {count} {event_type} after {timeout_s} s: {self.requests}")
