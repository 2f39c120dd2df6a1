"""The migration that narrows keys made by limited keys, on a real SQLite file and a real
PostgreSQL database holding keys as the service made them before: such a key without a limit
read every collection its owner reads, however its maker was limited."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from app.storage.db import Database
from tests.storage.schema_revisions import database_at, migrate_to

pytestmark = pytest.mark.integration

BEFORE = "0017"
# key id -> (the key that made it, its own limit)
KEYS: dict[str, tuple[str | None, list[str] | None]] = {
    "key_maker": (None, ["col_hr"]),  # limited, with keys:manage
    "key_open_child": ("key_maker", None),  # made without a limit: read everything
    "key_wider_child": ("key_maker", ["col_hr", "col_board"]),
    "key_other_child": ("key_maker", ["col_board"]),
    "key_free_maker": (None, None),
    "key_free_child": ("key_free_maker", None),
    "key_person": (None, ["col_board"]),
}


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Database]:
    yield from database_at(BEFORE, request, data_dir)


def _limits(database: Database) -> dict[str, list[str] | None]:
    with database.engine.connect() as connection:
        rows = connection.execute(text("SELECT key_id, collections FROM api_keys")).all()
    return {key_id: None if limit is None else json.loads(limit) for key_id, limit in rows}


def test_keys_made_by_a_limited_key_are_narrowed_to_its_collections(database: Database) -> None:
    with database.engine.begin() as connection:
        for n, (key_id, (parent, limit)) in enumerate(KEYS.items()):
            connection.execute(
                text(
                    "INSERT INTO api_keys (key_id, tenant_id, user_id, name, role, prefix, "
                    "key_hash, created_at, scopes, parent_key_id, collections) VALUES (:k, "
                    "'acme', 'usr_1', :k, 'admin', 'rag_x', :h, '2026-12-01 10:00:00+00:00', "
                    "'', :p, :c)"
                ),
                {
                    "k": key_id,
                    "h": f"{n:064d}",
                    "p": parent,
                    "c": None if limit is None else json.dumps(limit),
                },
            )
    migrate_to(database, "head")
    assert _limits(database) == {
        "key_maker": ["col_hr"],
        "key_open_child": ["col_hr"],
        "key_wider_child": ["col_hr"],
        "key_other_child": [],  # nothing its maker read: it reads nothing
        "key_free_maker": None,
        "key_free_child": None,
        "key_person": ["col_board"],
    }
