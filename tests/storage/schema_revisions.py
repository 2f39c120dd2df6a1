"""The newest migration revision, read from the migration scripts as Alembic reads them."""

from __future__ import annotations

from alembic.script import ScriptDirectory

from app.storage.migrate import alembic_config


def head_revision() -> str:
    """The newest revision: the schema the table models describe."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migrations found"
    return head
