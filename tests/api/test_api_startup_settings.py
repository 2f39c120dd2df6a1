"""A live server's start-up and the `RAG_*` variables around it: a misspelt setting is named in
the log with the setting it resembles, and a retired one stops the start with its replacement."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testkit.live_server import LiveServer

pytestmark = pytest.mark.integration


def test_a_misspelt_setting_is_named_in_the_log_with_the_one_it_resembles(
    tmp_path: Path,
) -> None:
    server = LiveServer(
        tmp_path / "data",
        {"RAG_CHUNK_SIZ": "500", "RAG_URL": "http://the-cli-reads-this", "RAG_TEST_X": "1"},
    )
    (tmp_path / ".env").write_text("RAG_TOPK=3\n")  # the server's working directory
    with server.running():
        pass
    log = server.log_path.read_text()
    assert "unknown setting ignored: RAG_CHUNK_SIZ (did you mean RAG_CHUNK_SIZE?)" in log
    assert "unknown setting ignored: RAG_TOPK (did you mean RAG_TOP_K?)" in log
    # Variables of the command line and of the tests are not the service's to judge.
    assert "RAG_URL" not in log and "RAG_TEST_X" not in log


def test_a_retired_setting_stops_the_start_naming_what_replaced_it(tmp_path: Path) -> None:
    server = LiveServer(tmp_path / "data", {"RAG_KEYWORD_SKIP_PRONOUNS": "true"})
    started = subprocess.run(
        [sys.executable, "-m", "app.serve"],
        env=server.env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode != 0
    assert "RAG_KEYWORD_SKIP_PRONOUNS is retired, use RAG_KEYWORD_PRONOUN_WEIGHT" in started.stderr
