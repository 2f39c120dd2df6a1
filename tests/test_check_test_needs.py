"""scripts/check_test_needs.py, which `make test` runs before pytest: what is missing is named
with the command that provides it, and a missing thing fails (exit 1) unless skips are allowed."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
CHECKER = REPO / "scripts" / "check_test_needs.py"


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_checker(**env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "RAG_TEST_ALLOW_SKIP_SERVICES"}
    environment.update(env)
    return subprocess.run(
        [sys.executable, str(CHECKER)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=REPO,
        timeout=120,
        check=False,
    )


def test_a_redis_on_a_wrong_port_and_a_missing_data_folder_are_listed_and_fail(
    tmp_path: Path,
) -> None:
    port = closed_port()
    nowhere = tmp_path / "no-data-here"
    result = run_checker(
        RAG_TEST_REDIS_URL=f"redis://127.0.0.1:{port}/0", RAG_EVAL_DATA_DIR=str(nowhere)
    )

    assert result.returncode == 1
    listed = result.stderr
    assert f"Redis at 127.0.0.1:{port}" in listed
    assert "make services" in listed  # the command that provides it
    assert f"the evaluation data in {nowhere}" in listed
    assert "RAG_EVAL_DATA_DIR=" in listed
    assert "Not running the tests" in listed


def test_allowing_skips_still_lists_what_is_missing_but_lets_the_tests_run(tmp_path: Path) -> None:
    port = closed_port()
    result = run_checker(
        RAG_TEST_POSTGRES_URL=f"postgresql+psycopg://root@127.0.0.1:{port}/test",
        RAG_TEST_ALLOW_SKIP_SERVICES="1",
    )

    assert result.returncode == 0
    assert f"PostgreSQL at 127.0.0.1:{port}" in result.stderr
    assert "will skip" in result.stderr


def test_tools_missing_from_path_are_named_with_their_debian_package(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    result = run_checker(PATH=str(empty), RAG_TEST_CHROMIUM=str(empty / "chromium"))

    assert result.returncode == 1
    listed = result.stderr
    assert re.search(r"prometheus and promtool on PATH.*\n.*apt-get install -y prometheus", listed)
    assert re.search(r"tesseract on PATH.*\n.*apt-get install -y tesseract-ocr ", listed)
    assert re.search(r"Chromium at .*chromium.*\n.*apt-get install -y chromium", listed)
    # and one command for every Debian package the list names
    every = r"All the Debian packages at once.*chromium.*prometheus.*tesseract-ocr"
    assert re.search(every, listed)


def test_a_complete_evaluation_data_folder_is_not_listed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for name in ("xquad/xquad.en.json", "xquad/xquad.ar.json", "arcd/arcd-test.json"):
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_text('{"data": []}', encoding="utf-8")
    result = run_checker(RAG_EVAL_DATA_DIR=str(data), RAG_TEST_REDIS_URL="redis://127.0.0.1:1/0")

    assert "evaluation data" not in result.stderr
    assert "Redis at 127.0.0.1:1" in result.stderr  # the check did run and report


def test_make_test_runs_the_check_before_pytest_and_ci_runs_make_test() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    # test-needs comes first among the prerequisites, so the list shows before anything runs.
    assert re.search(r"^test: test-needs( [^\n]*)?\n\t\$\(PY\) -m pytest$", makefile, re.M)
    assert re.search(r"^test-needs: .*\n\t\$\(PY\) scripts/check_test_needs\.py$", makefile, re.M)
    assert re.search(r"^make test$", (REPO / ".ci" / "run").read_text(encoding="utf-8"), re.M)
