"""A local scale-out stack: Chroma server, PostgreSQL database, Redis namespace, API and worker
processes, started as real subprocesses and cleaned up afterwards.

Used by the multi-process integration test and by `python -m bench.scaleout`. Every process gets
the same environment (shared JWT secret, data directory, database, Redis prefix), exactly as the
compose file gives the `api` and `worker` services.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[1]
POSTGRES_ADMIN_URL = os.environ.get(
    "RAG_TEST_POSTGRES_URL", "postgresql+psycopg://root@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("RAG_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
PASSWORD = "correct-horse-battery-staple"


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, timeout_s: float) -> None:
    """Block until something accepts connections on the loopback port."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"nothing listens on port {port} after {timeout_s:.0f} s")


@contextlib.contextmanager
def chroma_server(root: Path) -> Iterator[int]:
    """A real Chroma server (`chroma run`) over `root`, on a free port; its port, while open."""
    port = free_port()
    chroma = Path(sys.executable).parent / "chroma"
    with (root / "server.log").open("wb") as log:
        server = subprocess.Popen(
            [str(chroma), "run", "--path", str(root / "data"), "--port", str(port)],
            cwd=root,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, 60)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=10)


@dataclass
class Process:
    """One started subprocess and its log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    port: int | None = None

    @property
    def url(self) -> str:
        """Base URL of an API process."""
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        """The end of the process log (for failure messages)."""
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class LocalStack:
    """Start and clean up the scale-out backends and processes under `root`."""

    root: Path
    settings: dict[str, str] = field(default_factory=dict)
    prefix: str = field(default_factory=lambda: f"ragtest-scale-{uuid.uuid4().hex[:10]}")
    processes: list[Process] = field(default_factory=list)
    job_ids: set[str] = field(default_factory=set)
    database_url: str = ""
    chroma_port: int = 0
    # >0: the Chroma server's HNSW cache holds at most this many collections (a config file's
    # segment_manager.hnsw_index_pool_cache_config); 0: the server's default (65,536)
    chroma_cache_collections: int = 0
    # modules the API and worker processes are started through: `python -m *launcher MODULE`
    # (bench.many_tenants --memo passes ("bench.memoised",)); empty: `python -m MODULE`
    launcher: tuple[str, ...] = ()
    _database_name: str = ""

    def __post_init__(self) -> None:
        self.data_dir = self.root / "data"
        self.logs = self.root / "logs"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.jwt_secret = secrets.token_urlsafe(48)

    # --- backends ---

    def start_backends(self) -> None:
        """A Chroma server on a free port and a fresh PostgreSQL database; checks Redis."""
        client: redis.Redis[bytes] = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
        client.ping()
        client.close()
        admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
        self._database_name = self.prefix.replace("-", "_")
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{self._database_name}"')
        admin.dispose()
        url = make_url(POSTGRES_ADMIN_URL).set(database=self._database_name)
        self.database_url = url.render_as_string(hide_password=False)
        self.chroma_port = free_port()
        chroma = Path(sys.executable).parent / "chroma"
        argv = [str(chroma), "run", "--path", str(self.root / "chroma")]
        argv += ["--port", str(self.chroma_port)]
        if self.chroma_cache_collections:
            config = self.root / "chroma.yaml"
            config.write_text(
                f'persist_path: "{self.root / "chroma"}"\nport: {self.chroma_port}\n'
                'listen_address: "127.0.0.1"\nsegment_manager:\n'
                "  hnsw_index_pool_cache_config:\n    memory:\n"
                f"      capacity: {self.chroma_cache_collections}\n"
            )
            argv = [str(chroma), "run", str(config)]
        self._spawn("chroma", argv)
        wait_for_port(self.chroma_port, 60)

    def env(self) -> dict[str, str]:
        """The environment every API and worker process shares."""
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("RAG_") and key != "PYTHONPATH"
        }
        env.update(
            {
                "PYTHONPATH": str(REPO),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "ANONYMIZED_TELEMETRY": "False",
                "RAG_ENV": "production",
                "RAG_JWT_SECRET": self.jwt_secret,
                "RAG_DATA_DIR": str(self.data_dir),
                "RAG_DATABASE_URL": self.database_url,
                "RAG_REDIS_URL": REDIS_URL,
                "RAG_REDIS_KEY_PREFIX": self.prefix,
                "RAG_VECTOR_BACKEND": "chroma-http",
                "RAG_CHROMA_HOST": "127.0.0.1",
                "RAG_CHROMA_PORT": str(self.chroma_port),
                "RAG_JOB_BACKEND": "redis",
                "RAG_CACHE_BACKEND": "redis",
                "RAG_RATE_LIMIT_BACKEND": "redis",
                "RAG_EMBEDDING_PROVIDER": "use",
                "RAG_LLM_PROVIDER": "extractive",
                "RAG_RERANKER": "none",
                "RAG_LOG_LEVEL": "WARNING",
            }
        )
        env.update(self.settings)
        return env

    # --- processes ---

    def _spawn(self, name: str, argv: list[str], port: int | None = None) -> Process:
        log = self.logs / f"{name}.log"
        handle = log.open("ab")
        popen = subprocess.Popen(
            argv,
            cwd=self.root,  # not the repository: no developer `.env` leaks into the processes
            env=self.env(),
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a kill reaches its children
        )
        handle.close()
        process = Process(name, popen, log, port)
        self.processes.append(process)
        return process

    def start_api(self, name: str, port: int | None = None, workers: int = 1) -> Process:
        """An API process (`uvicorn app.main:app`), not yet ready."""
        port = port or free_port()
        argv = [sys.executable, "-m", *self.launcher, "uvicorn", "app.main:app"]
        argv += ["--host", "127.0.0.1"]
        argv += ["--port", str(port), "--workers", str(workers), "--log-level", "warning"]
        return self._spawn(name, argv, port)

    def start_worker(self, name: str) -> Process:
        """An ingestion worker process (`python -m app.worker`)."""
        argv = [sys.executable, "-m", *self.launcher, "app.worker", "--name", self.prefix + name]
        return self._spawn(name, argv)

    def wait_ready(self, api: Process, timeout_s: float = 120) -> None:
        """Block until the API answers `/ready` with 200."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not api.alive():
                raise RuntimeError(f"{api.name} exited:\n{api.tail()}")
            try:
                if httpx.get(api.url + "/ready", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise TimeoutError(f"{api.name} not ready after {timeout_s:.0f} s:\n{api.tail()}")

    def wait_worker_ready(self, worker: Process, timeout_s: float = 120) -> None:
        """Block until the worker registered with rq (its models are loaded by then)."""
        client: redis.Redis[bytes] = redis.Redis.from_url(REDIS_URL)
        key = f"rq:worker:{self.prefix}{worker.name}"
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                if not worker.alive():
                    raise RuntimeError(f"{worker.name} exited:\n{worker.tail()}")
                if client.exists(key):
                    return
                time.sleep(0.3)
        finally:
            client.close()
        raise TimeoutError(f"{worker.name} not registered after {timeout_s:.0f} s")

    def stop(self, process: Process, timeout_s: float = 30) -> None:
        """Stop gracefully (SIGTERM to the group), then kill if it lingers."""
        if process.alive():
            os.killpg(process.popen.pid, signal.SIGTERM)
            try:
                process.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill(process)
        self._reap_group(process)

    def kill(self, process: Process) -> None:
        """SIGKILL the process and its children, as a crashed container would die."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.popen.pid, signal.SIGKILL)
        process.popen.wait(10)

    def _reap_group(self, process: Process) -> None:
        # Children that outlive their parent (rq's scheduler) must not keep running.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.popen.pid, signal.SIGKILL)

    # --- users and cleanup ---

    def create_user(self, tenant: str, username: str) -> None:
        """Create a user directly in the stack's database (as `app.cli create-user` would)."""
        from app.config import load_settings
        from app.services.users import UserService
        from app.storage.db import open_database
        from app.storage.users import UserStore

        settings = load_settings(
            _env_file=None, data_dir=self.data_dir, database_url=self.database_url
        )
        database = open_database(self.database_url)
        try:
            users = UserService(UserStore(database, settings.quota_users), settings.bcrypt_rounds)
            users.create_user(tenant_id=tenant, username=username, password=PASSWORD)
        finally:
            database.dispose()

    def close(self) -> list[str]:
        """Stop every process, drop the database and delete the Redis keys; returns leftovers."""
        for process in reversed(self.processes):
            self.stop(process, timeout_s=15)
        if self._database_name:
            admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
            with admin.connect() as connection:
                connection.exec_driver_sql(
                    f'DROP DATABASE IF EXISTS "{self._database_name}" WITH (FORCE)'
                )
            admin.dispose()
        return self._clean_redis()

    def _clean_redis(self) -> list[str]:
        client: redis.Redis[bytes] = redis.Redis.from_url(REDIS_URL)
        try:
            patterns = [f"*{self.prefix}*"] + [f"rq:*{job_id}*" for job_id in self.job_ids]
            for pattern in patterns:
                keys = list(client.scan_iter(match=pattern, count=1000))
                if keys:
                    client.delete(*keys)
            for registry in ("rq:workers", "rq:queues"):  # sets naming our workers and queue
                for member in client.smembers(registry):
                    if self.prefix.encode() in member:
                        client.srem(registry, member)
            return [
                key.decode()
                for pattern in patterns
                for key in client.scan_iter(match=pattern, count=1000)
            ]
        finally:
            client.close()


class ApiClient:
    """A small authenticated client for one API process."""

    def __init__(self, base_url: str, token: str | None = None) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=60)
        self.token = token

    def login(self, username: str, password: str = PASSWORD) -> str:
        """Get a bearer token and use it for later calls."""
        response = self.http.post("/auth/token", data={"username": username, "password": password})
        response.raise_for_status()
        self.token = str(response.json()["access_token"])
        return self.token

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def upload(self, name: str, content: bytes) -> dict[str, Any]:
        """POST /documents; returns the accepted job."""
        response = self.http.post(
            "/documents", files={"file": (name, content)}, headers=self._headers()
        )
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    def get(self, path: str) -> httpx.Response:
        """An authenticated GET."""
        return self.http.get(path, headers=self._headers())

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """An authenticated POST with a JSON body."""
        return self.http.post(path, json=body, headers=self._headers())

    def delete(self, path: str) -> httpx.Response:
        """An authenticated DELETE."""
        return self.http.delete(path, headers=self._headers())

    def job(self, job_id: str) -> dict[str, Any]:
        """GET /jobs/{id}."""
        response = self.get(f"/jobs/{job_id}")
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    def wait_job(self, job_id: str, timeout_s: float = 120) -> dict[str, Any]:
        """Poll a job until it is done or failed."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if job["status"] in ("done", "failed"):
                return job
            time.sleep(0.2)
        raise TimeoutError(f"job {job_id} still {job['status']} after {timeout_s:.0f} s: {job}")

    def search(self, query: str, k: int = 5) -> dict[str, Any]:
        """POST /search."""
        response = self.post("/search", {"query": query, "k": k})
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    def query(self, question: str, k: int = 5) -> dict[str, Any]:
        """POST /query."""
        response = self.post("/query", {"question": question, "k": k})
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()
