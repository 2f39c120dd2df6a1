"""Shared fixtures: every test gets its own data directory and settings."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

# No test may reach a model hub or send telemetry.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from app.config import Settings, load_settings
from app.storage.db import Database, open_database
from app.storage.migrate import VERSION_TABLE
from app.storage.tables import Base
from tests.api.webhook_receiver import Receiver
from tests.availability import unavailable
from tests.fakes import FakeEmbedder
from tests.fresh_database import fresh_postgres_database


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs(present, message): fail (or skip if allowed) when not present"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    # A missing dependency fails the test unless RAG_TEST_ALLOW_SKIP_SERVICES=1 is set.
    for marker in item.iter_markers(name="needs"):
        if not marker.kwargs["present"]:
            unavailable(marker.kwargs["message"])


@pytest.fixture
def embedder() -> FakeEmbedder:
    """The fake embedder (tests/fakes.py): deterministic vectors, nothing to load."""
    return FakeEmbedder()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A real local webhook endpoint that checks signatures (tests/api/webhook_receiver.py)."""
    found = Receiver().start()
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A fresh data directory for this test only."""
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    """Settings isolated to the test's data directory, with the `extractive` LLM; a test that
    builds a container hands it the fake embedder (`tests.fakes.fake_providers`)."""
    return load_settings(
        _env_file=None,
        data_dir=data_dir,
        llm_provider="extractive",
        env="development",
    )


# --- real SQL databases and Redis, for integration tests -----------------------------------------

POSTGRES_ADMIN_URL = os.environ.get(
    "RAG_TEST_POSTGRES_URL", "postgresql+psycopg://root@127.0.0.1:5432/test"
)
REDIS_TEST_URL = os.environ.get("RAG_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL database created for this test session and dropped afterwards."""
    from sqlalchemy.exc import OperationalError

    with ExitStack() as stack:
        try:
            url = stack.enter_context(fresh_postgres_database(POSTGRES_ADMIN_URL))
        except OperationalError as exc:
            unavailable(f"PostgreSQL unreachable at {POSTGRES_ADMIN_URL}: {exc}")
        yield url


def drop_schema(database: Database) -> None:
    """Drop every table of the service and its migration record."""
    Base.metadata.drop_all(database.engine)
    with database.engine.begin() as connection:
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {VERSION_TABLE}")


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_database(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Database]:
    """The service database with fresh tables, on a SQLite file and on the local PostgreSQL."""
    if request.param == "sqlite":
        url = f"sqlite:///{data_dir / 'service.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    database = open_database(url)
    try:
        yield database
    finally:
        if request.param == "postgresql":
            drop_schema(database)
        database.dispose()


@dataclass
class RedisNamespace:
    """A live Redis client and a key prefix no other test uses."""

    client: redis.Redis[bytes]
    prefix: str


@pytest.fixture
def redis_namespace() -> Iterator[RedisNamespace]:
    """The local Redis with a unique key prefix; every key under it is deleted afterwards."""
    client: redis.Redis[bytes] = redis.Redis.from_url(REDIS_TEST_URL, socket_connect_timeout=1)
    try:
        client.ping()
    except redis.RedisError as exc:
        unavailable(f"Redis unreachable at {REDIS_TEST_URL}: {exc}")
    prefix = f"ragtest-{uuid.uuid4().hex[:12]}"
    try:
        yield RedisNamespace(client, prefix)
    finally:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=500))
        if keys:
            client.delete(*keys)
        client.close()
