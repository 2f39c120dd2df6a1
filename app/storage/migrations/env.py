"""Alembic's environment: the revisions run against the service database, and autogenerate
compares it with the app's table models (`app.storage.tables`).

`app.storage.migrate` hands over a connection that already holds the schema lock and its
transaction. The `alembic` command line (e.g. `alembic revision --autogenerate`) gets none and
opens the database the settings name (`RAG_DATABASE_URL`, else SQLite in the data directory).
"""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy import Connection

from app.storage.tables import Base, UTCDateTime


def _render_item(kind: str, item: Any, _context: AutogenContext) -> str | Literal[False]:
    # Revisions stay frozen: a UTC timestamp is written as the plain column type it stores.
    if kind == "type" and isinstance(item, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        # SQLite cannot alter or drop most columns in place: batch operations copy the table.
        render_as_batch=True,
        render_item=_render_item,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run_from_command_line() -> None:
    from app.config import get_settings
    from app.storage.db import Database

    database = Database(get_settings().sqlalchemy_url)
    try:
        with database.engine.connect() as connection:
            _run(connection)
    finally:
        database.dispose()


if context.is_offline_mode():
    # The first revisions look at the database (which tables exist), so they need one.
    raise SystemExit("offline (--sql) migrations are unsupported; use `python -m app.cli migrate`")
given = context.config.attributes.get("connection")
if given is not None:
    _run(given)
else:
    _run_from_command_line()
