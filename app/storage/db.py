"""The SQL database of users, jobs, documents and chunks: one engine per process, short
sessions.

SQLite (a file under the data directory) is the default; PostgreSQL is the same code with another
URL. SQLite runs in WAL mode with a busy timeout, so API threads, worker threads and a second
process can read while one writes, and writers wait for each other instead of failing.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, DateTime, Engine, create_engine, event, func, inspect, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeDecorator

from app.config import Settings
from app.errors import ConfigurationError

logger = logging.getLogger(__name__)

# How long a SQLite writer waits for the lock before giving up (ms). Ingestion commits are short,
# so seconds of waiting means something is wrong rather than busy.
SQLITE_BUSY_TIMEOUT_MS = 15_000


def conflict_insert(dialect: str, table: Any) -> postgresql.Insert | sqlite.Insert:
    """An INSERT into `table` that supports ON CONFLICT clauses, for this database dialect."""
    return postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table)


def advisory_key(name: str) -> int:
    """The PostgreSQL advisory lock key (signed 64-bit) for a name, the same in every process
    (derived from sha256: Python's hash() is salted per process)."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Base(DeclarativeBase):
    """Declarative base of every table in the service database."""


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def _configure_sqlite(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        # WAL + NORMAL is durable across application crashes (only power loss can lose the last
        # commits), and much cheaper than FULL's fsync per commit.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def build_engine(url: str) -> Engine:
    """An engine for a SQLite or PostgreSQL URL, configured for concurrent use."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:"):
            raise ConfigurationError(
                "RAG_DATABASE_URL: an in-memory SQLite database is not shared between threads "
                "or processes; use a file path"
            )
        Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        )
        event.listen(engine, "connect", _configure_sqlite)
        return engine
    if backend == "postgresql":
        return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)
    raise ConfigurationError(
        f"RAG_DATABASE_URL: unsupported database {backend!r}; use sqlite:///path or "
        "postgresql+psycopg://user@host:port/db"
    )


class Database:
    """An engine plus a session factory; build one per process and share it between threads."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = build_engine(url)
        self.dialect = self.engine.dialect.name
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._local_locks: dict[str, tuple[threading.Lock, int]] = {}  # name -> (lock, users)
        self._local_guard = threading.Lock()

    @contextmanager
    def named_lock(self, name: str) -> Iterator[None]:
        """Mutual exclusion for `name` among every thread and process using this database.

        PostgreSQL: a session advisory lock on a connection of its own, so the work inside may
        use other sessions and other processes wait for it. SQLite: the database of the one
        process that owns the embedded store, so a process-local lock suffices.
        """
        if self.dialect != "postgresql":
            with self._local_lock(name):
                yield
            return
        key = advisory_key(name)
        with self.engine.connect() as connection:
            connection.execute(select(func.pg_advisory_lock(key)))
            try:
                yield
            finally:
                connection.execute(select(func.pg_advisory_unlock(key)))

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that commits when the block succeeds and rolls back when it raises."""
        with self._sessions() as session, session.begin():
            yield session

    @contextmanager
    def _local_lock(self, name: str) -> Iterator[None]:
        # One lock per name while anyone uses it; dropped after, so names do not accumulate.
        with self._local_guard:
            lock, users = self._local_locks.get(name, (threading.Lock(), 0))
            self._local_locks[name] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._local_guard:
                lock, users = self._local_locks[name]
                if users == 1:
                    del self._local_locks[name]
                else:
                    self._local_locks[name] = (lock, users - 1)

    def create_schema(self) -> None:
        """Create every table that does not exist yet (idempotent; safe at every start-up)."""
        _register_tables()
        with self.engine.begin() as connection:
            if self.dialect == "postgresql":
                # Several processes start together; without the lock two of them can both see a
                # table missing and one fails on the duplicate CREATE.
                connection.execute(select(func.pg_advisory_xact_lock(advisory_key("schema"))))
            Base.metadata.create_all(connection)
            add_missing_columns(connection)

    def drop_schema(self) -> None:
        """Drop every table of the service (tests and resets only)."""
        _register_tables()
        Base.metadata.drop_all(self.engine)

    def ping(self) -> bool:
        """Whether the database answers a trivial query (for `/ready`)."""
        try:
            with self.engine.connect() as connection:
                connection.exec_driver_sql("SELECT 1")
            return True
        except Exception:
            return False

    def dispose(self) -> None:
        """Close pooled connections (at shutdown, and in a child process after fork)."""
        self.engine.dispose()


def add_missing_columns(connection: Connection) -> list[str]:
    """Add the nullable columns a table gained since the database was created; returns them as
    `table.column`.

    `create_all` creates missing tables but never alters existing ones, so a database made by an
    older release would lack a newer column and every read of the table would fail. Only
    nullable columns are added this way (old rows read as NULL); anything else needs a migration.
    """
    inspector = inspect(connection)
    existing_tables = set(inspector.get_table_names())
    added: list[str] = []
    for table in Base.metadata.sorted_tables:
        if table.name not in existing_tables:
            continue
        present = {column["name"] for column in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in present:
                continue
            if not column.nullable:
                raise ConfigurationError(
                    f"the database table {table.name!r} lacks the column {column.name!r}, "
                    "which cannot be added automatically; migrate or recreate the database"
                )
            preparer = connection.dialect.identifier_preparer
            column_type = column.type.compile(dialect=connection.dialect)
            connection.exec_driver_sql(
                f"ALTER TABLE {preparer.format_table(table)} "
                f"ADD COLUMN {preparer.format_column(column)} {column_type}"
            )
            added.append(f"{table.name}.{column.name}")
    if added:
        logger.info("added columns to an older database schema: %s", ", ".join(added))
    return added


def _register_tables() -> None:
    # Importing the modules attaches their tables to Base.metadata; done lazily because those
    # modules import this one.
    from app.jobs import tables  # noqa: F401
    from app.storage import chunks, conversations, documents, users  # noqa: F401


def open_database(url: str) -> Database:
    """Connect and make sure the schema exists: what the API and the workers call at start-up."""
    database = Database(url)
    database.create_schema()
    return database


def database_from_settings(settings: Settings) -> Database:
    """The service database named by `settings.sqlalchemy_url`, with its tables created."""
    return open_database(settings.sqlalchemy_url)
