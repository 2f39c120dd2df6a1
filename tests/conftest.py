"""Shared fixtures: every test gets its own data directory and settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# No test may reach a model hub or send telemetry.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from app.config import Settings, load_settings  # noqa: E402


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A fresh data directory for this test only."""
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    """Settings isolated to the test's data directory, with fast fake providers."""
    return load_settings(
        _env_file=None,
        data_dir=data_dir,
        embedding_provider="fake",
        llm_provider="extractive",
        env="development",
    )
