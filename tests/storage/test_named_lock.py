"""Named locks of the service database: what keeps a delete and a finishing upload apart."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.storage.db import Database

pytestmark = pytest.mark.integration


@pytest.fixture
def other_process_database(sql_database: Database) -> Iterator[Database]:
    """What a second process would use: its own engine on PostgreSQL; SQLite serves one
    process (the embedded setup), whose threads share one Database."""
    if sql_database.dialect != "postgresql":
        yield sql_database
        return
    other = Database(sql_database.url)
    try:
        yield other
    finally:
        other.dispose()


def test_a_held_name_makes_the_other_holder_wait(
    sql_database: Database, other_process_database: Database
) -> None:
    events: list[str] = []
    entered = threading.Event()

    def waiter() -> None:
        with other_process_database.named_lock("document:acme:doc_1"):
            events.append("waiter enters")
            entered.set()

    with sql_database.named_lock("document:acme:doc_1"):
        thread = threading.Thread(target=waiter, daemon=True)
        thread.start()
        # Correct code never enters while the name is held, so this wait cannot flake.
        assert not entered.wait(timeout=0.5)
        events.append("holder releases")
    assert entered.wait(timeout=30), "the waiter never got the released name"
    thread.join(timeout=30)
    assert events == ["holder releases", "waiter enters"]


def _try_enter(
    database: Database, name: str, wait_s: float = 30.0
) -> tuple[bool, threading.Thread]:
    """Whether another thread gets `name` within wait_s, and that thread (it may still wait)."""
    entered = threading.Event()

    def enter() -> None:
        with database.named_lock(name):
            entered.set()

    thread = threading.Thread(target=enter, daemon=True)
    thread.start()
    return entered.wait(timeout=wait_s), thread


def test_other_names_do_not_wait_and_a_failing_body_releases(
    sql_database: Database, other_process_database: Database
) -> None:
    with sql_database.named_lock("document:acme:doc_1"):
        assert _try_enter(other_process_database, "document:acme:doc_2")[0]
        assert _try_enter(other_process_database, "document:globex:doc_1")[0]
        entered, waiting = _try_enter(other_process_database, "document:acme:doc_1", wait_s=1)
        assert not entered
    waiting.join(timeout=30)
    assert not waiting.is_alive()  # it got the name once this holder let go
    with pytest.raises(RuntimeError), sql_database.named_lock("document:acme:doc_3"):
        raise RuntimeError("indexing failed")
    assert _try_enter(other_process_database, "document:acme:doc_3")[0]


def test_process_local_locks_are_forgotten_once_unused(data_dir: Path) -> None:
    database = Database(f"sqlite:///{data_dir / 'locks.db'}")
    for i in range(100):
        with database.named_lock(f"document:acme:doc_{i}"):
            pass
    assert database._local_locks == {}
