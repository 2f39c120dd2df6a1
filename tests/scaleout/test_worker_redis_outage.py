"""A worker process rides out a Redis outage: Redis gone while a worker runs a job (a Redis
restart) must not leave the deployment without a worker once Redis is back.

The processes reach Redis through a loopback TCP relay that the test cuts (every connection
dropped, new ones refused) and restores, as a restarting Redis would; the shared test Redis
itself is never stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.connection import parse_url

from testkit.local_stack import REDIS_URL, ApiClient, wait_for_port
from tests.scaleout.running_stack import running_stack
from tests.scaleout.test_scaleout import maintenance_log

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


class RedisRelay:
    """Forwards a loopback port to the test Redis until `cut`, again after `restore`."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self._serve()

    def _serve(self) -> None:
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # cut
                return
            upstream = socket.create_connection(self.upstream)
            with self.lock:
                self.sockets += [client, upstream]
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                target.sendall(data)
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Drop every connection and refuse new ones (Redis stopped)."""
        self.listener.close()
        with self.lock:
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self.sockets.clear()

    def restore(self) -> None:
        """Accept connections again on the same port (Redis back)."""
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self._serve()
        wait_for_port(self.port, 5)


@pytest.fixture
def relay() -> Iterator[RedisRelay]:
    url = parse_url(REDIS_URL)
    relay = RedisRelay(url.get("host", "127.0.0.1"), int(url.get("port", 6379)))
    yield relay
    relay.listener.close()


def test_a_worker_takes_jobs_again_after_redis_went_away_during_one(
    tmp_path: Path, relay: RedisRelay
) -> None:
    database = parse_url(REDIS_URL).get("db", 0)
    settings = {
        "RAG_REDIS_URL": f"redis://127.0.0.1:{relay.port}/{database}",
        "RAG_JOB_HEARTBEAT_S": "0.5",
        "RAG_CHUNK_SIZE": "300",
        "RAG_CHUNK_OVERLAP": "50",
    }
    with running_stack(tmp_path, settings, apis=1) as (stack, (api,)):
        stack.create_user("acme", "alice")
        client = ApiClient(api.url)
        client.login("alice")
        running = client.upload("log.txt", maintenance_log(3000))["job_id"]
        deadline = time.monotonic() + 120
        while client.job(running)["status"] != "processing" and time.monotonic() < deadline:
            time.sleep(0.05)
        relay.cut()  # Redis stops while the worker runs the job, and stays down past its end
        while client.job(running)["status"] == "processing" and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)
        relay.restore()

        # The interrupted job ends, and a later upload is taken by the worker.
        assert client.wait_job(running, timeout_s=120)["status"] == "done"
        later = client.upload("note.txt", b"The relief valve is inspected every 30 days.")
        assert client.wait_job(later["job_id"], timeout_s=60)["status"] == "done"
        worker = next(p for p in stack.processes if p.name == "w1")
        assert worker.alive(), worker.tail()
        client.close()
        # A stop asked for still stops it (idle, it leaves at once).
        os.killpg(worker.popen.pid, signal.SIGTERM)
        assert worker.popen.wait(30) == 0
