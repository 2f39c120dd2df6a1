"""A database created before chunks had `page_role` keeps working: the column is added at
start-up, old rows read as content pages, and new rows store their role."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect

from app.domain import Chunk
from app.storage.chunks import ChunkStore
from app.storage.db import Database, open_database

pytestmark = pytest.mark.integration

# The chunks table as the previous release created it (no page_role), with one row in it.
OLD_CHUNKS_TABLE = """
CREATE TABLE chunks (
    tenant_id VARCHAR(64) NOT NULL, chunk_id VARCHAR(64) NOT NULL,
    document_id VARCHAR(64) NOT NULL, source VARCHAR(255) NOT NULL, page INTEGER NOT NULL,
    page_label VARCHAR(64) NOT NULL, chunk_index INTEGER NOT NULL, start INTEGER NOT NULL,
    "end" INTEGER NOT NULL, text TEXT NOT NULL, extra TEXT NOT NULL,
    PRIMARY KEY (tenant_id, chunk_id)
)
"""
OLD_ROW = """
INSERT INTO chunks VALUES ('acme', 'c-old', 'doc-1', 'old.pdf', 2, 'ii', 0, 0, 12,
                           'old chunk text', '{}')
"""


def _chunk(cid: str, role: str | None) -> Chunk:
    return Chunk(cid, "acme", "doc-2", "new.pdf", 1, "1", 0, 0, 8, "new text", {}, role)  # type: ignore[arg-type]


def _old_database(url: str) -> None:
    database = Database(url)
    with database.engine.begin() as connection:
        connection.exec_driver_sql(OLD_CHUNKS_TABLE)
        connection.exec_driver_sql(OLD_ROW)
    database.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def old_database_url(request: pytest.FixtureRequest, data_dir: Path) -> str:
    if request.param == "sqlite":
        url = f"sqlite:///{data_dir / 'old.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
        cleanup = Database(url)
        cleanup.drop_schema()
        with cleanup.engine.begin() as connection:
            connection.exec_driver_sql("DROP TABLE IF EXISTS chunks")
        cleanup.dispose()
    _old_database(url)
    return url


def test_start_up_adds_the_column_and_old_rows_still_read(old_database_url: str) -> None:
    database = open_database(old_database_url)
    try:
        columns = {c["name"] for c in inspect(database.engine).get_columns("chunks")}
        assert "page_role" in columns
        store = ChunkStore(database)
        [old] = store.get("acme", ["c-old"])
        assert old.text == "old chunk text"
        assert old.page_label == "ii"
        assert old.page_role is None
        store.write_document("acme", "doc-2", [_chunk("c-new", "contents")])
        [new] = store.get("acme", ["c-new"])
        assert new.page_role == "contents"
        # A second start-up finds nothing to add and changes nothing.
        again = open_database(old_database_url)
        assert [c.page_role for c in ChunkStore(again).get("acme", ["c-old", "c-new"])] == [
            None,
            "contents",
        ]
        again.dispose()
    finally:
        database.drop_schema()
        database.dispose()


def test_page_role_round_trips_on_a_fresh_database(sql_database: Database) -> None:
    store = ChunkStore(sql_database)
    store.write_document("acme", "doc-2", [_chunk("a", "index"), _chunk("b", None)])
    roles = {c.id: c.page_role for c in store.get("acme", ["a", "b"])}
    assert roles == {"a": "index", "b": None}
