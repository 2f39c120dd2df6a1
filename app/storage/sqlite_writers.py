"""One SQLite writer at a time within this process, handed over the moment it commits.

SQLite lets one transaction write at a time. A second writer that finds the lock taken is
put to sleep by SQLite's busy handler in growing steps (1, 2, 5, 10, 15, 20, 25 ms...), and
keeps sleeping after the lock is free again: under a burst of small uploads the API's and the
workers' short write transactions spent 10 ms each waiting for locks held a fraction of that.
Here each connection of the process takes a lock shared by every connection to the same file
before its transaction's first write and gives it back when the transaction ends, so the next
writer starts as soon as the last one commits. Readers never take it (WAL lets them read beside
a writer). Another process using the file (the CLI) still meets SQLite's own lock and busy
timeout, as before.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any

# Statements that make SQLite take its write lock (an implicit transaction starts before DML).
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "BEGIN IMMEDIATE", "BEGIN EXCLUSIVE")

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def writer_lock(database: str) -> threading.Lock:
    """The lock of the writers of one database file in this process."""
    with _locks_guard:
        return _locks.setdefault(database, threading.Lock())


def _writes(statement: str) -> bool:
    return statement.lstrip()[:15].upper().startswith(_WRITES)


class WriterConnection(sqlite3.Connection):
    """A connection that takes its file's writer lock before a transaction's first write."""

    lock: threading.Lock  # set on the subclass made for each database file
    wait_s: float  # how long to wait for it: SQLite's busy timeout

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.holds_lock = False

    def cursor(self, factory: Any = None) -> sqlite3.Cursor:  # type: ignore[override]
        return super().cursor(factory or WriterCursor)

    # The shortcuts make a plain cursor of their own: route them through ours.
    def execute(self, statement: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self.cursor().execute(statement, parameters)

    def executemany(self, statement: str, parameters: Any, /) -> sqlite3.Cursor:
        return self.cursor().executemany(statement, parameters)

    def before(self, statement: str) -> None:
        """Take the lock when `statement` is the transaction's first write."""
        if self.holds_lock or not _writes(statement):
            return
        if not self.lock.acquire(timeout=self.wait_s):
            raise sqlite3.OperationalError("database is locked")
        self.holds_lock = True

    def after(self) -> None:
        """Give the lock back once no transaction is open (a statement outside one)."""
        if self.holds_lock and not self.in_transaction:
            self.release()

    def release(self) -> None:
        if self.holds_lock:
            self.holds_lock = False
            self.lock.release()

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self.after()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self.after()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.release()


class WriterCursor(sqlite3.Cursor):
    """A cursor whose writes go through its connection's writer lock."""

    def execute(self, statement: str, parameters: Any = (), /) -> WriterCursor:
        return self._locked(super().execute, statement, parameters)

    def executemany(self, statement: str, parameters: Any, /) -> WriterCursor:
        return self._locked(super().executemany, statement, parameters)

    def _locked(
        self, run: Callable[[str, Any], object], statement: str, parameters: Any
    ) -> WriterCursor:
        """`run` the statement, holding the writer lock when it is the transaction's first write."""
        connection: WriterConnection = self.connection  # type: ignore[assignment]
        connection.before(statement)
        try:
            run(statement, parameters)
            return self
        finally:
            connection.after()


def connection_class(database: str, wait_s: float) -> type[WriterConnection]:
    """The connection class (`sqlite3.connect(factory=...)`) of one database file."""
    return type(
        "FileWriterConnection",
        (WriterConnection,),
        {"lock": writer_lock(database), "wait_s": wait_s},
    )
