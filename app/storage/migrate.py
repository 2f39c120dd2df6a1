"""Schema migrations: bring the service database to the newest Alembic revision, once, however
many processes start together.

The revisions live in `app/storage/migrations/versions`. Every process runs this at start-up
(`Database.migrate`, through `open_database`), and `python -m app.cli migrate` runs it on demand.
Processes that start at once (the API and its workers) queue on one lock, and the later ones
find the schema already at head: PostgreSQL takes a transaction-scoped advisory lock, SQLite
opens the transaction with BEGIN IMMEDIATE (its single write lock). On both, the whole upgrade
is one transaction, so a migration that fails leaves the schema as it was.

A database created before migrations existed (tables made by `create_all`, no version table)
needs no separate step: the first two revisions create only what it lacks.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.exc import OperationalError

from app.errors import ConfigurationError

logger = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# Where Alembic records the revision a database is at (its default name).
VERSION_TABLE = "alembic_version"


@dataclass(frozen=True)
class SchemaChange:
    """The revision a database was at before a migration (None: no record) and after it."""

    before: str | None
    after: str

    @property
    def changed(self) -> bool:
        """Whether any revision ran."""
        return self.before != self.after


def alembic_config() -> Config:
    """The Alembic configuration of the service's migrations (no ini file needed)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


@dataclass(frozen=True)
class _Revisions:
    head: str
    known: frozenset[str]


@lru_cache(maxsize=1)
def _revisions() -> _Revisions:
    # Read once per process: start-up checks the head on every database it opens.
    script = ScriptDirectory.from_config(alembic_config())
    head = script.get_current_head()
    if head is None:
        raise ConfigurationError(f"no migrations found in {MIGRATIONS_DIR}")
    return _Revisions(head, frozenset(rev.revision for rev in script.walk_revisions()))


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at; None when it records none (new or pre-migration)."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade_to_head(engine: Engine, lock_key: int) -> SchemaChange:
    """Run every revision the database lacks, holding the schema lock (`lock_key` is the
    PostgreSQL advisory lock key); a database already at head costs one query."""
    for attempt in range(_SQLITE_BUSY_ATTEMPTS):
        try:
            return _upgrade_to_head(engine, lock_key)
        except OperationalError as exc:
            # SQLite answers some lock conflicts of a brand-new file (the switch to WAL, a read
            # snapshot that cannot become a write) at once, without its busy wait: try again.
            last = attempt == _SQLITE_BUSY_ATTEMPTS - 1
            if engine.dialect.name != "sqlite" or "locked" not in str(exc) or last:
                raise
            time.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable")


_SQLITE_BUSY_ATTEMPTS = 6


def _upgrade_to_head(engine: Engine, lock_key: int) -> SchemaChange:
    revisions = _revisions()
    with engine.connect() as connection:
        if current_revision(connection) == revisions.head:
            return SchemaChange(revisions.head, revisions.head)
    with engine.connect() as connection:
        _lock_schema(connection, lock_key)
        before = current_revision(connection)  # another process may have migrated meanwhile
        if before is not None and before not in revisions.known:
            raise ConfigurationError(
                f"the database schema is at revision {before!r}, which this release does not "
                f"know (its newest is {revisions.head!r}): was it migrated by a newer release?"
            )
        if before != revisions.head:
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
        connection.commit()
    if before != revisions.head:
        logger.info("database schema migrated from %s to %s", before or "nothing", revisions.head)
    return SchemaChange(before, revisions.head)


def _lock_schema(connection: Connection, lock_key: int) -> None:
    # Both locks last until the transaction ends, which is when the migration is committed.
    if connection.dialect.name == "postgresql":
        connection.execute(select(func.pg_advisory_xact_lock(lock_key)))
    else:
        # The sqlite3 driver does not begin a transaction before DDL; this one is explicit, takes
        # the write lock now (a second process waits for it), and makes the DDL atomic.
        connection.exec_driver_sql("BEGIN IMMEDIATE")
