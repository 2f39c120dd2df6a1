"""The SQL database of users, jobs, documents and chunks: one engine per process, short
sessions.

SQLite (a file under the data directory) is the default; PostgreSQL is the same code with another
URL. SQLite runs in WAL mode with a busy timeout, so API threads, worker threads and a second
process can read while one writes, and writers wait for each other instead of failing.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Delete, Engine, Update, create_engine, event, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Row, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql.expression import Executable

from app.config import Settings
from app.errors import ConfigurationError
from app.storage.migrate import SchemaChange, upgrade_to_head
from app.storage.sqlite_writers import connection_class

# The advisory lock that serialises schema migrations of processes starting together.
SCHEMA_LOCK = "schema"

# A failed statement's error (logged, and stored on a job) would otherwise carry its bound
# values: chunk texts, password hashes, file names. The statement itself is still shown.
ENGINE_OPTIONS: dict[str, Any] = {"hide_parameters": True}

# How long a SQLite writer waits for the lock before giving up (ms). Ingestion commits are short,
# so seconds of waiting means something is wrong rather than busy.
SQLITE_BUSY_TIMEOUT_MS = 15_000


def conflict_insert(dialect: str, table: Any) -> postgresql.Insert | sqlite.Insert:
    """An INSERT into `table` that supports ON CONFLICT clauses, for this database dialect."""
    return postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table)


def affected_rows(session: Session, statement: Update | Delete) -> int:
    """Run an UPDATE or DELETE in `session`; how many rows it matched."""
    return int(session.execute(statement).rowcount)  # type: ignore[attr-defined]


def advisory_key(name: str) -> int:
    """The PostgreSQL advisory lock key (signed 64-bit) for a name, the same in every process
    (derived from sha256: Python's hash() is salted per process)."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def _configure_sqlite(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")  # before anything waits
        cursor.execute("PRAGMA journal_mode=WAL")
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
            **ENGINE_OPTIONS,
            connect_args={
                "check_same_thread": False,
                "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000,
                # This process's writers queue on one lock instead of SQLite's sleeping retries.
                "factory": connection_class(
                    str(Path(database).resolve()), SQLITE_BUSY_TIMEOUT_MS / 1000
                ),
            },
        )
        event.listen(engine, "connect", _configure_sqlite)
        return engine
    if backend == "postgresql":
        return create_engine(
            url, **ENGINE_OPTIONS, pool_pre_ping=True, pool_size=5, max_overflow=10
        )
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

    def first_row(self, statement: Executable, values: Mapping[str, Any]) -> Row[Any] | None:
        """The first row `statement` reads with `values`, or None. For the reads made on every
        request, upload or batch: a plain pooled connection and a statement built once, no ORM
        session to set up."""
        with self.engine.connect() as connection:
            return connection.execute(statement, values).first()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that commits when the block succeeds and rolls back when it raises."""
        with self._sessions() as session, session.begin():
            yield session

    @contextmanager
    def write_session(self, lock_name: str) -> Iterator[Session]:
        """A session that holds a write lock from its first statement, for a check that must
        still hold when its write commits (the last admin, a count under a cap).

        SQLite ignores `SELECT ... FOR UPDATE`, and its driver begins a transaction only at the
        first write, so a check read before it can be stale by then: `BEGIN IMMEDIATE` takes
        the database's write lock first (other writers wait, with the busy timeout). PostgreSQL:
        a transaction-scoped advisory lock on `lock_name`, which also orders inserts that no
        row lock could (two users added at once under the tenant's cap).
        """
        with self._sessions() as session, session.begin():
            connection = session.connection()
            if self.dialect == "sqlite":
                connection.exec_driver_sql("BEGIN IMMEDIATE")
            elif self.dialect == "postgresql":
                connection.execute(select(func.pg_advisory_xact_lock(advisory_key(lock_name))))
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

    def migrate(self) -> SchemaChange:
        """Bring the schema to the newest migration (safe when several processes start at once)."""
        return upgrade_to_head(self.engine, advisory_key(SCHEMA_LOCK))

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


class DatabaseStore:
    """The base of the stores that keep their tables in the service database: each reads and
    writes through `self._db`'s short sessions."""

    def __init__(self, database: Database) -> None:
        self._db = database


def open_database(url: str) -> Database:
    """Connect and migrate the schema to the newest revision: what the API and the workers call
    at start-up."""
    database = Database(url)
    database.migrate()
    return database


def database_from_settings(settings: Settings) -> Database:
    """The service database named by `settings.sqlalchemy_url`, its schema migrated."""
    return open_database(settings.sqlalchemy_url)
