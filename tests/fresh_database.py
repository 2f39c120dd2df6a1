"""A PostgreSQL database of one's own: the test session's (the `postgres_url` fixture), or one
test's, for tests that need an empty database rather than the session's (whose tables the
`sql_database` fixture creates)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine
from sqlalchemy.engine import make_url


@contextmanager
def fresh_postgres_database(server_url: str) -> Iterator[str]:
    """Create an empty database on the server of `server_url`, yield its URL, drop it after."""
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    name = f"rag_test_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except Exception:
        admin.dispose()
        raise
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
