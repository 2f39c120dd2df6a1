"""X-Forwarded-For from a peer while RAG_TRUSTED_PROXIES is empty is ignored, and logged once
per process as a likely misconfigured gateway (every client behind it would share one budget)."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app

pytestmark = pytest.mark.unit

FORWARDED = {"X-Forwarded-For": "198.51.100.23"}


def client(settings: Settings) -> TestClient:
    """The real app (no lifespan: /health needs no components) reached from 203.0.113.9."""
    return TestClient(create_app(settings, start_workers=False), client=("203.0.113.9", 50000))


def warnings_about_forwarding(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and "X-Forwarded-For" in record.getMessage()
    ]


def test_the_first_forwarded_request_without_trusted_proxies_is_logged_once(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    api = client(settings)
    with caplog.at_level(logging.WARNING):
        assert api.get("/health").status_code == 200  # no header: nothing to say
        assert warnings_about_forwarding(caplog) == []
        for _ in range(3):
            assert api.get("/health", headers=FORWARDED).status_code == 200
    (warning,) = warnings_about_forwarding(caplog)
    assert "RAG_TRUSTED_PROXIES" in warning and "203.0.113.9" in warning


def test_nothing_is_logged_once_proxies_are_configured(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    # A client behind a configured gateway that sends the header itself is not a misconfiguration.
    api = client(settings.model_copy(update={"trusted_proxies": "10.0.0.0/8"}))
    with caplog.at_level(logging.WARNING):
        assert api.get("/health", headers=FORWARDED).status_code == 200
    assert warnings_about_forwarding(caplog) == []
