"""The real `rag` executable against a live server: one server and one admin key per module.

`make test` installs the client into .venv, so `rag` sits next to the test's Python; run
elsewhere (a shared interpreter), the client is built once per session into a temp folder
with pip, offline, the same way. Either way the console script runs this checkout's
`client/rag_client` (first on PYTHONPATH), never an older installed copy.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testkit.live_server import REPO_ROOT, LiveServer


@pytest.fixture(scope="session")
def rag_executable(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `rag` console script."""
    beside = Path(sys.executable).parent / "rag"
    if beside.exists():
        return beside
    target = tmp_path_factory.mktemp("rag-client")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--target",
            str(target),
            str(REPO_ROOT / "client"),
        ],
        check=True,
        capture_output=True,
    )
    return target / "bin" / "rag"


@dataclass
class Ran:
    """One run of `rag`: its exit code and outputs."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """The one JSON document on stdout (fails if there is anything else)."""
        return json.loads(self.stdout)


@dataclass
class Rag:
    """Runs `rag` as a script would: its own environment, a config folder of its own."""

    executable: Path
    home: Path
    env: dict[str, str]

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The process environment of a run."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
        env.update(HOME=str(self.home), XDG_CONFIG_HOME=str(self.home / ".config"))
        # This checkout's client first: an installed `rag` (a shared .venv) may be older;
        # then a --target build's own folder.
        env["PYTHONPATH"] = os.pathsep.join(
            (str(REPO_ROOT / "client"), str(self.executable.parent.parent))
        )
        env.update(self.env)
        env.update(extra or {})
        return env

    def __call__(self, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Ran:
        done = subprocess.run(
            [str(self.executable), *args],
            env=self.environment(env),
            capture_output=True,
            timeout=timeout,
            check=False,
            cwd=self.home,
        )
        return Ran(done.returncode, done.stdout.decode(), done.stderr.decode())

    def popen(self, *args: str) -> subprocess.Popen[bytes]:
        """Start `rag` without waiting (to interrupt it), with Ctrl-C as a terminal gives it
        even when the test run itself ignores SIGINT (started in the background by a shell)."""
        return subprocess.Popen(
            [str(self.executable), *args],
            env=self.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.home,
            preexec_fn=_ctrl_c_as_on_a_terminal,
        )


def _ctrl_c_as_on_a_terminal() -> None:
    """In the child before `rag` runs: SIGINT's default action, so Python turns it into
    KeyboardInterrupt (a process started with SIGINT ignored keeps ignoring it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class ClientServer:
    """A live server, an admin's API key on it, and `rag` pointed at both."""

    server: LiveServer
    key: str
    rag: Rag


def make_key(server: LiveServer, username: str, name: str) -> str:
    """A new API key of the user, made with the service's own CLI (printed once)."""
    printed = server.cli("create-key", "--username", username, "--name", name)
    return next(word for word in printed.split() if word.startswith("rag_"))


@pytest.fixture(scope="module")
def client_server(
    tmp_path_factory: pytest.TempPathFactory, rag_executable: Path
) -> Iterator[ClientServer]:
    """One live server per module with an admin (tenant `acme`) and `rag` for them."""
    root = tmp_path_factory.mktemp("client")
    server = LiveServer(root / "data")
    server.create_user("acme", "ada", "Sync-keeper 42 lighthouse")
    key = make_key(server, "ada", "tests")
    home = root / "home"
    home.mkdir()
    rag = Rag(rag_executable, home, {"RAG_URL": server.url, "RAG_API_KEY": key})
    with server.running():
        yield ClientServer(server, key, rag)
