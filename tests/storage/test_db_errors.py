"""A failed statement's error names the statement but not its values, on SQLite and PostgreSQL:
the error text goes to the log and onto a failed job, and the values are chunk texts, file
names and password hashes."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from app.storage.db import Database
from app.storage.tables import ChunkRow

pytestmark = pytest.mark.integration

SECRET = "Zebra-7731: the vault code is 0451"


def chunk_row(text: str) -> dict[str, object]:
    return {
        "tenant_id": "acme",
        "chunk_id": "c" * 32,
        "document_id": "doc_1",
        "source": "vault-manual.pdf",
        "page": 1,
        "page_label": "1",
        "chunk_index": 0,
        "start": 0,
        "end": len(text),
        "text": text,
        "extra": "{}",
    }


def test_a_database_error_never_carries_the_values_it_was_sent(
    sql_database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    with sql_database.session() as session:
        session.execute(insert(ChunkRow), [chunk_row("the first version")])
    log = logging.getLogger("app.test")
    with pytest.raises(IntegrityError) as failed, caplog.at_level(logging.ERROR):
        try:
            with sql_database.session() as session:  # the same key again: a constraint error
                session.execute(insert(ChunkRow), [chunk_row(SECRET)])
        except IntegrityError:
            log.exception("writing the chunks failed")
            raise
    message = str(failed.value)
    assert "INSERT INTO chunks" in message  # still says what failed
    assert "parameters hidden" in message
    for text in (message, repr(failed.value), caplog.text):
        assert "Zebra-7731" not in text
        assert "vault-manual.pdf" not in text
