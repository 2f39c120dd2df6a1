"""scripts/download_models.py --env-file: an unreachable model hub disables the reranker, loudly.

The real unreachable hub is exercised by every offline `docker build` (its log shows the line);
here the download itself is replaced, so the test is fast and never touches the network.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from app.config import Settings
from tests.repo_scripts import load_script


@pytest.fixture
def script() -> ModuleType:
    return load_script("download_models")


def _env_written(
    script: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    settings: Settings,
    tmp_path: Path,
    reranker: str,
    snapshot: Callable[[str, Path], Path],
) -> list[str]:
    """The lines of the env file the script writes for RAG_RERANKER=`reranker` when `snapshot`
    stands in for the download."""
    env = tmp_path / "image.env"
    chosen = settings.model_copy(update={"reranker": reranker})
    monkeypatch.setattr(script, "_snapshot", snapshot)
    monkeypatch.setattr(script, "load_settings", lambda: chosen)
    monkeypatch.setattr(script, "download_llm", lambda s: None)  # the GGUF has its own tests
    monkeypatch.setattr(sys, "argv", ["download_models.py", "--env-file", str(env)])
    assert script.main() == 0
    return env.read_text().splitlines()


def test_unreachable_hub_writes_reranker_none_and_says_why(
    script: ModuleType, settings: Settings, tmp_path: Path, monkeypatch, capsys
) -> None:
    def unreachable(repo_id: str, target: Path) -> Path:
        raise OSError("Name or service not known")

    env = _env_written(script, monkeypatch, settings, tmp_path, "cross-encoder", unreachable)

    assert "RAG_RERANKER=none" in env
    out = capsys.readouterr().out
    assert "could not download 'cross-encoder/mmarco-mMiniLMv2-L12-H384-v1'" in out
    assert "Name or service not known" in out
    assert "continuing with RAG_RERANKER=none" in out


def test_fetched_reranker_is_kept(
    script: ModuleType, settings: Settings, tmp_path: Path, monkeypatch
) -> None:
    fetched: list[str] = []

    def snapshot(repo_id: str, target: Path) -> Path:
        fetched.append(repo_id)
        return target

    env = _env_written(script, monkeypatch, settings, tmp_path, "cross-encoder", snapshot)

    assert fetched == ["cross-encoder/mmarco-mMiniLMv2-L12-H384-v1"]
    assert "RAG_RERANKER=cross-encoder" in env


def test_reranker_none_downloads_nothing(
    script: ModuleType, settings: Settings, tmp_path: Path, monkeypatch
) -> None:
    def must_not_run(repo_id: str, target: Path) -> Path:
        raise AssertionError("downloaded although RAG_RERANKER=none")

    env = _env_written(script, monkeypatch, settings, tmp_path, "none", must_not_run)

    assert "RAG_RERANKER=none" in env
