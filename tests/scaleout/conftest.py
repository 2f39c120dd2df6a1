"""The job container and its rq worker that the job-running tests of this folder share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.config import Settings
from app.container import Container
from app.job_runners.redis_worker import IngestWorker
from tests.scaleout.job_container import ingest_worker, job_container


@pytest.fixture
def container(settings: Settings, redis_namespace: Any) -> Iterator[Container]:
    """A job container (tests/scaleout/job_container.py) on the test's own Redis prefix."""
    with job_container(settings, redis_namespace) as built:
        yield built


@pytest.fixture
def worker(container: Container) -> IngestWorker:
    """The rq worker on that container."""
    return ingest_worker(container)
