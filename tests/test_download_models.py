"""scripts/download_models.py --env-file: an unreachable model hub disables the reranker, loudly.

The real unreachable hub is exercised by every offline `docker build` (its log shows the line);
here the download itself is replaced, so the test is fast and never touches the network.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from app.config import Settings

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "download_models.py"


@pytest.fixture
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("download_models", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(
    script: ModuleType, monkeypatch: pytest.MonkeyPatch, settings: Settings, env: Path
) -> None:
    monkeypatch.setattr(script, "load_settings", lambda: settings)
    monkeypatch.setattr(script, "download_llm", lambda s: None)  # the GGUF has its own tests
    monkeypatch.setattr(sys, "argv", ["download_models.py", "--env-file", str(env)])
    assert script.main() == 0


def test_unreachable_hub_writes_reranker_none_and_says_why(
    script: ModuleType, settings: Settings, tmp_path: Path, monkeypatch, capsys
) -> None:
    def unreachable(repo_id: str, target: Path) -> Path:
        raise OSError("Name or service not known")

    monkeypatch.setattr(script, "_snapshot", unreachable)
    env = tmp_path / "image.env"
    _run(script, monkeypatch, settings.model_copy(update={"reranker": "cross-encoder"}), env)

    assert "RAG_RERANKER=none" in env.read_text().splitlines()
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

    monkeypatch.setattr(script, "_snapshot", snapshot)
    env = tmp_path / "image.env"
    _run(script, monkeypatch, settings.model_copy(update={"reranker": "cross-encoder"}), env)

    assert fetched == ["cross-encoder/mmarco-mMiniLMv2-L12-H384-v1"]
    assert "RAG_RERANKER=cross-encoder" in env.read_text().splitlines()


def test_reranker_none_downloads_nothing(
    script: ModuleType, settings: Settings, tmp_path: Path, monkeypatch
) -> None:
    def must_not_run(repo_id: str, target: Path) -> Path:
        raise AssertionError("downloaded although RAG_RERANKER=none")

    monkeypatch.setattr(script, "_snapshot", must_not_run)
    env = tmp_path / "image.env"
    _run(script, monkeypatch, settings.model_copy(update={"reranker": "none"}), env)

    assert "RAG_RERANKER=none" in env.read_text().splitlines()
