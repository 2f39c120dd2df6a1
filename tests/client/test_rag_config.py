"""`rag`'s configuration (flags > environment > the 0600 file `rag login` writes) and its
retries of 429/503 after Retry-After, against a live server and a real local HTTP server."""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from testkit.http_peer import QuietHandler, serving_handler
from tests.client.conftest import ClientServer, Rag

pytestmark = pytest.mark.integration


def test_login_writes_a_private_config_file_that_env_and_flags_override(
    client_server: ClientServer,
) -> None:
    rag = client_server.rag
    server, key = client_server.server, client_server.key
    bare = {"RAG_URL": "", "RAG_API_KEY": ""}
    assert rag("docs", "ls", env=bare).code == 2  # nothing configured yet

    logged = rag("login", "--url", server.url, "--api-key", key, "--json", env=bare)
    assert logged.code == 0, logged.stderr
    path = Path(logged.json()["config"])
    assert path == rag.home / ".config" / "rag" / "config.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert key in path.read_text()

    assert rag("docs", "ls", "--json", env=bare).code == 0  # the file alone
    wrong = {"RAG_URL": "", "RAG_API_KEY": "rag_wrong"}
    assert rag("docs", "ls", "--json", env=wrong).code == 2  # the environment beats the file
    flagged = rag("--api-key", key, "docs", "ls", "--json", env=wrong)
    assert flagged.code == 0, flagged.stderr  # the flag beats the environment
    nowhere = {"RAG_URL": "http://127.0.0.1:9", "RAG_API_KEY": ""}
    assert rag("--url", server.url, "docs", "ls", "--json", env=nowhere).code == 0


def test_login_with_a_password_makes_a_key(client_server: ClientServer, tmp_path: Path) -> None:
    rag = Rag(client_server.rag.executable, tmp_path, {"RAG_URL": client_server.server.url})
    made = rag_with_stdin(
        rag,
        "Sync-keeper 42 lighthouse\n",
        "login",
        "--username",
        "ada",
        "--tenant",
        "acme",
        "--password-stdin",
        "--json",
    )
    assert made.returncode == 0, made.stderr
    saved = json.loads((tmp_path / ".config" / "rag" / "config.json").read_text())
    assert saved["api_key"].startswith("rag_") and saved["api_key"] != client_server.key
    assert rag("docs", "ls", "--json").code == 0


def rag_with_stdin(rag: Rag, stdin: str, *args: str):
    import subprocess

    return subprocess.run(
        [str(rag.executable), *args],
        input=stdin.encode(),
        env=rag.environment(),
        capture_output=True,
        timeout=120,
        check=False,
    )


class Busy(QuietHandler):
    """Answers `status` with Retry-After the first `busy` times, then an empty document list."""

    busy = 2
    status = 503
    retry_after = "1"
    seen: ClassVar[list[float]] = []

    def do_GET(self) -> None:
        Busy.seen.append(time.monotonic())
        if len(Busy.seen) <= Busy.busy:
            busy = {"error": {"code": "overloaded", "message": "busy"}}
            retry = {"Retry-After": Busy.retry_after}
            self.send_body(Busy.status, "application/json", json.dumps(busy).encode(), retry)
        else:
            self.send_body(200, "application/json", json.dumps({"data": [], "count": 0}).encode())


@pytest.fixture
def busy_server() -> Iterator[str]:
    Busy.seen = []
    with serving_handler(Busy) as server:
        yield f"http://127.0.0.1:{server.server_port}"


@pytest.mark.parametrize("status", [429, 503])
def test_429_and_503_are_retried_after_retry_after(
    client_server: ClientServer, busy_server: str, status: int
) -> None:
    Busy.busy, Busy.retry_after, Busy.status = 2, "1", status
    ran = client_server.rag("--url", busy_server, "docs", "ls", "--json")
    assert ran.code == 0, ran.stderr
    assert ran.json() == {"data": [], "count": 0}
    assert len(Busy.seen) == 3
    assert Busy.seen[1] - Busy.seen[0] >= 0.9 and Busy.seen[2] - Busy.seen[1] >= 0.9
    assert str(status) in ran.stderr  # the wait is said on stderr, stdout stays one JSON document


def test_retries_stop_after_a_few_tries(client_server: ClientServer, busy_server: str) -> None:
    Busy.busy, Busy.retry_after, Busy.status = 100, "0", 503
    ran = client_server.rag("--url", busy_server, "docs", "ls", "--json")
    assert ran.code == 1
    assert ran.json()["error"]["code"] == "overloaded"
    assert len(Busy.seen) == 6


def test_a_long_retry_after_is_capped(busy_server: str) -> None:
    from rag_client.http import Api

    Busy.busy, Busy.retry_after, Busy.status = 1, "3600", 503
    waits: list[float] = []
    api = Api(busy_server, "rag_x", sleep=waits.append, log=lambda line: None, max_wait_s=60)
    assert api.get("/documents") == {"data": [], "count": 0}
    assert waits == [60]


def test_python_dash_m_runs_the_same_command(client_server: ClientServer) -> None:
    import subprocess
    import sys

    ran = subprocess.run(
        [sys.executable, "-m", "rag_client", "docs", "ls", "--json"],
        env=client_server.rag.environment(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert "data" in json.loads(ran.stdout)
