"""The newest migration revision, read from the migration scripts as Alembic reads them, and
moving a test database to a given revision."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.script import ScriptDirectory

from app.storage.db import Database, open_database
from app.storage.migrate import alembic_config
from tests.fresh_database import fresh_postgres_database


def head_revision() -> str:
    """The newest revision: the schema the table models describe."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migrations found"
    return head


def migrate_to(database: Database, revision: str) -> None:
    """Upgrade the database to `head`, or downgrade it to `revision` (a migrated database)."""
    config = alembic_config()
    with database.engine.connect() as connection:
        config.attributes["connection"] = connection
        if revision == "head":
            command.upgrade(config, "head")
        else:
            command.downgrade(config, revision)
        connection.commit()


def database_at(
    revision: str, request: pytest.FixtureRequest, data_dir: Path
) -> Iterator[Database]:
    """An empty database of its own at `revision`: a SQLite file, or with the fixture param
    `postgresql` a fresh PostgreSQL database (disposed of after the test)."""
    if request.param == "sqlite":
        yield from _migrated_back(f"sqlite:///{data_dir / 'service.db'}", revision)
        return
    with fresh_postgres_database(request.getfixturevalue("postgres_url")) as url:
        yield from _migrated_back(url, revision)


def _migrated_back(url: str, revision: str) -> Iterator[Database]:
    database = open_database(url)  # migrates to head
    migrate_to(database, revision)
    yield database
    database.dispose()
