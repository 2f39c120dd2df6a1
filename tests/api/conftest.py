"""Fixtures of the API tests: module-scoped apps on the real stack (tests.api.harness builds
them) and a headless Chromium for the web-app tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.api.browser import launched_chromium
from tests.api.harness import ApiFactory, ApiHarness, api_settings


@pytest.fixture(scope="module")
def api_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiFactory]:
    """Build apps on the real stack for this module; each is shut down at the module's end."""
    clients: list[TestClient] = []

    def make(
        *, start_workers: bool = True, client_host: str = "testclient", **overrides: Any
    ) -> ApiHarness:
        data_dir = tmp_path_factory.mktemp("api-data")
        settings = api_settings(data_dir, **overrides)
        app = create_app(settings, start_workers=start_workers)
        client = TestClient(app, client=(client_host, 50000))
        client.__enter__()
        clients.append(client)
        return ApiHarness(app, client, settings)

    yield make
    for client in reversed(clients):
        client.__exit__(None, None, None)


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    """The module's default app on the real stack, workers running."""
    return api_factory()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium (a fresh profile) for one test module's web-app tests."""
    with launched_chromium() as context:
        yield context


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh tab of the module's browser, closed after the test."""
    opened = browser.new_page()
    yield opened
    opened.close()
