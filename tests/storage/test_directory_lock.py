"""A second process cannot open an embedded Chroma directory the first one owns."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.storage.directory_lock import lock_directory

pytestmark = pytest.mark.unit

_TRY_LOCK = """
import sys
from pathlib import Path
from app.errors import ConfigurationError
from app.storage.directory_lock import lock_directory
try:
    lock_directory(Path(sys.argv[1]))
except ConfigurationError as exc:
    print(exc)
    sys.exit(3)
"""


def _other_process_locks(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _TRY_LOCK, str(directory)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=60,
    )


def test_second_process_is_refused_while_the_owner_lives(tmp_path: Path) -> None:
    lock_directory(tmp_path / "chroma")
    lock_directory(tmp_path / "chroma")  # the owner may open it again
    result = _other_process_locks(tmp_path / "chroma")
    assert result.returncode == 3, result.stderr
    assert "in use by another process" in result.stdout


def test_lock_of_a_dead_owner_is_released(tmp_path: Path) -> None:
    first = _other_process_locks(tmp_path / "chroma")  # locks, then exits
    assert first.returncode == 0, first.stdout + first.stderr
    second = _other_process_locks(tmp_path / "chroma")
    assert second.returncode == 0, second.stdout + second.stderr
