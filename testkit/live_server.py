"""A real `python -m app.serve` process on a free loopback port, which tests can crash."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
LIVE_JWT_SECRET = "live-server-test-key-7Hq2Lm9Vx4Bn8Pc3Rz6Tw1Ys5Ku0Fd"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class LiveServer:
    """One data directory served by successive server processes (start, crash, start again)."""

    data_dir: Path
    env_overrides: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    module: str = "app.serve"  # what `python -m` runs (a test may wrap the server)

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """Where the server processes write their output."""
        return self.data_dir.parent / "server.log"

    def env(self) -> dict[str, str]:
        """The environment of the server and CLI: real stack, everything under data_dir."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
        env.update(
            {
                "PYTHONPATH": str(REPO_ROOT),
                "HF_HUB_OFFLINE": "1",
                "ANONYMIZED_TELEMETRY": "False",
                "RAG_ENV": "production",
                "RAG_HOST": "127.0.0.1",
                "RAG_PORT": str(self.port),
                "RAG_DATA_DIR": str(self.data_dir),
                "RAG_JWT_SECRET": LIVE_JWT_SECRET,
                "RAG_EMBEDDING_PROVIDER": "use",
                "RAG_LLM_PROVIDER": "extractive",
                "RAG_LOG_LEVEL": "WARNING",
            }
        )
        env.update(self.env_overrides)
        return env

    def cli(self, *args: str, stdin: str = "") -> str:
        """Run `python -m app.cli ...` against the same data directory; returns stdout."""
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", *args],
            input=stdin.encode(),
            env=self.env(),
            cwd=self.data_dir.parent,  # no stray .env file from the repository
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return done.stdout.decode()

    def create_user(self, tenant: str, username: str, password: str, role: str = "") -> None:
        """Create a user with the CLI, the password given on stdin as an operator would (no
        `role`: the CLI's default, admin for a tenant's first user and member after)."""
        self.cli(
            "create-user",
            "--tenant",
            tenant,
            "--username",
            username,
            "--password-stdin",
            *(["--role", role] if role else []),
            stdin=password + "\n",
        )

    def start(self, timeout_s: float = 180.0) -> None:
        """Start a server process and wait until /ready answers 200."""
        assert self.process is None, "already running"
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module],
            env=self.env(),
            cwd=self.data_dir.parent,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a crash takes its children too
        )
        log.close()
        self.starts += 1
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"server exited with {self.process.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/ready", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.crash()
        raise AssertionError(f"server not ready after {timeout_s} s:\n{self.log()}")

    @contextmanager
    def running(self, timeout_s: float = 180.0) -> Iterator[LiveServer]:
        """Started for the block and stopped after it, even when the block (a fixture's set-up
        after the start, or the tests it yields to) raised."""
        self.start(timeout_s)
        try:
            yield self
        finally:
            self.stop()

    def crash(self) -> None:
        """SIGKILL the server and its children (parser processes): no shutdown code runs."""
        if self.process is None:
            return
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None

    def stop(self) -> None:
        """Graceful stop (SIGTERM), falling back to a crash."""
        if self.process is None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.crash()
        self.process = None

    def log(self) -> str:
        """The tail of the server output (for failure messages)."""
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-6000:]
