"""`rag` as a person at a terminal sees it: progress bars per file and overall on stderr (stdout
keeps its one JSON document), and Ctrl-C in the middle of an upload that the server holds
stops the command within seconds, in a plain sync and in a watched one.

The server is a local stub (tests/client/stub_service.py): uploads to the live server finish
too fast on loopback to be watched or interrupted halfway."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path

import pytest

from tests.client.conftest import Rag
from tests.client.stub_service import StubService

pytestmark = pytest.mark.integration

COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # within a line
MOVES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")  # between lines
STOPS_WITHIN_S = 5.0  # Ctrl-C to exit: the grace of uploads in flight, and start-up slack


def stub_rag(executable: Path, home: Path, stub: StubService, **env: str) -> Rag:
    return Rag(executable, home, {"RAG_URL": stub.url, "RAG_API_KEY": "rag_stub", **env})


def run_on_terminal(rag: Rag, *args: str) -> tuple[int, str, str]:
    """Run `rag` with stderr on a pseudo-terminal (120 columns) and stdout on a pipe; the exit
    code, stdout, and what the terminal showed with its control sequences removed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {"TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    running = subprocess.Popen(
        [str(rag.executable), *args],
        env=rag.environment(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=follower,
        cwd=rag.home,
    )
    os.close(follower)
    shown: list[bytes] = []

    def read_terminal() -> None:
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                return
            if not data:
                return
            shown.append(data)

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    try:
        stdout, _ = running.communicate(timeout=120)
    finally:
        reader.join(10)
        os.close(leader)
    terminal = COLOUR.sub("", b"".join(shown).decode(errors="replace"))
    return running.returncode, stdout.decode(), MOVES.sub("\n", terminal)


def test_upload_draws_a_bar_per_file_and_one_overall_and_json_stays_alone_on_stdout(
    rag_executable: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "alpha-report.txt").write_text("a" * 199_999 + "\n")  # 200.0 kB
    (folder / "beta-notes.txt").write_text("b" * 299_999 + "\n")  # 300.0 kB
    with StubService(answer_after_s=1.0).running() as stub:
        rag = stub_rag(rag_executable, tmp_path, stub)
        code, stdout, terminal = run_on_terminal(rag, "upload", str(folder), "--json")

        assert code == 0, terminal
        files = json.loads(stdout)["files"]  # the whole of stdout is one JSON document
        assert sorted(Path(f["path"]).name for f in files) == ["alpha-report.txt", "beta-notes.txt"]
        assert {f["status"] for f in files} == {"queued"}
        lines = terminal.splitlines()
        # Each file had its own bar while the server held it, full once its bytes were sent.
        assert any(re.search(r"alpha-report\.txt .*200\.0/200\.0 kB", line) for line in lines)
        assert any(re.search(r"beta-notes\.txt .*300\.0/300\.0 kB", line) for line in lines)
        # The overall bar counts both files' bytes.
        assert any(re.search(r"all 2 files .*500\.0/500\.0 kB", line) for line in lines)

        piped = rag("upload", str(folder), "--json")  # stderr not a terminal: no bars
        assert piped.code == 0 and len(piped.json()["files"]) == 2
        assert "all 2 files" not in piped.stderr and "kB" not in piped.stderr


def interrupt_when_uploading(rag: Rag, stub: StubService, *args: str) -> tuple[int, float]:
    """Start `rag`, press Ctrl-C once the stub holds its first upload; the exit code and how
    long the command took to stop."""
    running = rag.popen(*args)
    try:
        stub.wait_for_uploads(1)
        pressed = time.monotonic()
        running.send_signal(signal.SIGINT)
        code = running.wait(timeout=60)
        return code, time.monotonic() - pressed
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()


@pytest.mark.parametrize(
    ("flags", "exit_code"),
    [((), 130), (("--watch", "--json"), 0)],  # Ctrl-C is how a watch ends
    ids=["sync", "watched-sync"],
)
def test_ctrl_c_stops_a_sync_within_seconds_while_the_server_holds_an_upload(
    rag_executable: Path, tmp_path: Path, flags: tuple[str, ...], exit_code: int
) -> None:
    folder = tmp_path / "held"
    folder.mkdir()
    for i in range(5):
        (folder / f"entry-{i}.txt").write_text(f"Entry {i} of the log.")
    with StubService(answer_after_s=None).running() as stub:  # never answers an upload
        rag = stub_rag(rag_executable, tmp_path, stub)
        args = ("sync", str(folder), *flags, "--concurrency", "1")
        code, took = interrupt_when_uploading(rag, stub, *args)
        assert code == exit_code
        assert took < STOPS_WITHIN_S, f"stopped {took:.1f} s after Ctrl-C"
        time.sleep(0.5)
        assert len(stub.uploaded()) == 1  # no other upload started after Ctrl-C
