"""The writers of one SQLite file in this process queue on one lock, taken at a transaction's
first write and given back when it ends, however it ends; readers never wait for it."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from app.storage.db import Database
from app.storage.sqlite_writers import connection_class, writer_lock

pytestmark = pytest.mark.integration


def _connect(path: Path, wait_s: float = 5.0) -> sqlite3.Connection:
    connection = sqlite3.connect(
        path, factory=connection_class(str(path), wait_s), check_same_thread=False
    )
    connection.execute("PRAGMA journal_mode=WAL")
    return connection


@pytest.fixture
def path(tmp_path: Path) -> Path:
    database = tmp_path / "rag.db"
    with _connect(database) as setup:
        setup.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    return database


def test_a_second_writer_waits_for_the_first_to_commit_and_readers_never_wait(
    path: Path,
) -> None:
    first, second, reader = _connect(path), _connect(path), _connect(path)
    first.execute("INSERT INTO notes (text) VALUES ('first')")  # holds the lock until commit
    wrote = threading.Event()

    def write_second() -> None:
        second.execute("INSERT INTO notes (text) VALUES ('second')")
        second.commit()
        wrote.set()

    writer = threading.Thread(target=write_second)
    writer.start()
    assert not wrote.wait(0.3)  # still waiting for the first writer
    assert reader.execute("SELECT count(*) FROM notes").fetchone() == (0,)  # reads go on
    first.commit()
    assert wrote.wait(5)
    writer.join(5)
    assert [row[0] for row in reader.execute("SELECT text FROM notes ORDER BY id")] == [
        "first",
        "second",
    ]


@pytest.mark.parametrize("end", ["commit", "rollback", "close"])
def test_the_lock_is_given_back_however_the_transaction_ends(path: Path, end: str) -> None:
    lock = writer_lock(str(path))
    connection = _connect(path)
    connection.execute("SELECT count(*) FROM notes").fetchone()
    assert not lock.locked()  # a read takes nothing
    connection.execute("INSERT INTO notes (text) VALUES ('x')")
    assert lock.locked()
    getattr(connection, end)()
    assert not lock.locked()


def test_a_failed_write_outside_a_transaction_gives_the_lock_back(path: Path) -> None:
    connection = _connect(path)
    with pytest.raises(sqlite3.OperationalError):
        connection.execute("INSERT INTO missing_table VALUES (1)")
    assert not writer_lock(str(path)).locked()
    connection.isolation_level = None  # autocommit: each write is its own transaction
    connection.execute("INSERT INTO notes (text) VALUES ('y')")
    assert not writer_lock(str(path)).locked()


def test_a_writer_that_waits_longer_than_the_busy_timeout_gets_database_is_locked(
    path: Path,
) -> None:
    holder, waiter = _connect(path), _connect(path, wait_s=0.2)
    holder.execute("INSERT INTO notes (text) VALUES ('held')")
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        waiter.execute("INSERT INTO notes (text) VALUES ('late')")
    holder.commit()
    waiter.execute("INSERT INTO notes (text) VALUES ('late')")
    waiter.commit()


def test_each_file_has_its_own_lock_and_the_service_database_uses_it(tmp_path: Path) -> None:
    assert writer_lock(str(tmp_path / "a.db")) is writer_lock(str(tmp_path / "a.db"))
    assert writer_lock(str(tmp_path / "a.db")) is not writer_lock(str(tmp_path / "b.db"))
    database = Database(f"sqlite:///{tmp_path / 'service.db'}")
    lock = writer_lock(str((tmp_path / "service.db").resolve()))
    with database.session() as session:
        session.connection().exec_driver_sql("CREATE TABLE t (x INTEGER)")
        session.connection().exec_driver_sql("INSERT INTO t VALUES (1)")
        assert lock.locked()
    assert not lock.locked()
    with database.write_session("check") as session:  # BEGIN IMMEDIATE takes it at once
        assert lock.locked()
    assert not lock.locked()
    database.dispose()
