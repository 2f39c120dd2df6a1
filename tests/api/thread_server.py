"""A real uvicorn server for an app built in the test process, on a free loopback port.

Unlike `live_server.LiveServer` (a separate process), the test can reach into the running app's
components: swap in a scripted model, read the limiters' counts and the model lock's state.
`ServerUser` is a user made in its container, talking to it over HTTP.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from app.container import Container
from testkit.live_server import free_port


class ThreadServer:
    """uvicorn serving `app` on a background thread (HTTP over real sockets)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.port = free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_config=None, access_log=False
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="uvicorn", daemon=True)

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def container(self) -> Container:
        """The running app's components."""
        container: Container = self.app.state.container
        return container

    def start(self, timeout_s: float = 180.0) -> None:
        """Start serving; returns once the lifespan has run and the socket listens."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise AssertionError("uvicorn did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        """Graceful shutdown (the lifespan's end runs)."""
        self._server.should_exit = True
        self._thread.join(timeout=60)


@contextmanager
def serving(app: FastAPI) -> Iterator[ThreadServer]:
    """A started ThreadServer for the duration of the block."""
    server = ThreadServer(app)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class ServerUser:
    """A user of one tenant (`name-tenant`), created in the server's container, talking to the
    server over HTTP with a bearer token."""

    PASSWORD = "a long enough password"

    def __init__(self, server: ThreadServer, tenant: str, name: str) -> None:
        container = server.container
        record = container.users.create_user(
            tenant_id=tenant, username=f"{name}-{tenant}", password=self.PASSWORD
        )
        token = container.token_codec.issue(record.id, tenant).access_token
        self.headers = {"Authorization": f"Bearer {token}"}
        self.url = server.url

    def post(self, path: str, body: dict[str, Any], **kw: Any) -> httpx.Response:
        """POST `body` as JSON to `path` (a slow answer gets 120 s unless `timeout` says)."""
        return httpx.post(
            f"{self.url}{path}", json=body, headers=self.headers, **{"timeout": 120, **kw}
        )

    def query(self, question: str, **kw: Any) -> httpx.Response:
        return self.post("/query", {"question": question}, **kw)

    def upload(self, name: str, content: bytes) -> dict[str, Any]:
        """Upload a file and wait for its job to end; the job as GET /jobs/{id} shows it."""
        response = httpx.post(
            f"{self.url}/documents", files={"file": (name, content)}, headers=self.headers
        )
        assert response.status_code == 202, response.text
        job_id = response.json()["job_id"]
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            job: dict[str, Any] = httpx.get(
                f"{self.url}/jobs/{job_id}", headers=self.headers
            ).json()
            if job["status"] in ("done", "failed"):
                return job
            time.sleep(0.1)
        raise AssertionError("upload did not finish")
