"""Fixtures for ingestion tests."""

from __future__ import annotations

import pytest

from app.ingestion import LoadLimits


@pytest.fixture
def limits() -> LoadLimits:
    """Default limits, as configured out of the box."""
    return LoadLimits()
