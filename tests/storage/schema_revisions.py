"""The newest migration revision, read from the migration scripts as Alembic reads them, and
moving a test database to a given revision."""

from __future__ import annotations

from alembic import command
from alembic.script import ScriptDirectory

from app.storage.db import Database
from app.storage.migrate import alembic_config


def head_revision() -> str:
    """The newest revision: the schema the table models describe."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migrations found"
    return head


def migrate_to(database: Database, revision: str) -> None:
    """Upgrade the database to `head`, or downgrade it to `revision` (a migrated database)."""
    config = alembic_config()
    with database.engine.connect() as connection:
        config.attributes["connection"] = connection
        if revision == "head":
            command.upgrade(config, "head")
        else:
            command.downgrade(config, revision)
        connection.commit()
