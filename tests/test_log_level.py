"""RAG_LOG_LEVEL holds for every logger: a library that sets its own logger to DEBUG (bm25s
does, at import) does not write a line per keyword-index build into the service's log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]

PROGRAM = """
import logging, sys
from app.observability import configure_logging
configure_logging(sys.argv[1])
import bm25s
bm25s.BM25().index([[0, 1], [1, 2]], show_progress=False)  # logs "Building index..." at DEBUG
logging.getLogger("app.ingestion").warning("kept")
logging.getLogger("app.ingestion").info("info line")
"""


def _log_lines(level: str) -> list[dict[str, str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, level],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]


def test_a_library_logger_set_to_debug_is_held_to_the_configured_level() -> None:
    lines = _log_lines("WARNING")

    assert [line["message"] for line in lines] == ["kept"]


def test_debug_level_still_shows_the_library_lines() -> None:
    messages = [line["message"] for line in _log_lines("DEBUG")]

    assert any(message.startswith("Building index") for message in messages)
    assert "info line" in messages
