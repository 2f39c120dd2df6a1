"""Schema steps that several revisions take, each as one call.

Revisions are frozen, and these run inside them: a step must keep doing exactly what it does
today, or it changes every revision that took it. A new kind of step is a new function.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op


def add_columns(table: str, *columns: sa.Column[Any]) -> None:
    """Add the columns to the table in one batch (SQLite copies the table once for them all)."""
    with op.batch_alter_table(table) as batch:
        for column in columns:
            batch.add_column(column)


def drop_columns(table: str, *names: str) -> None:
    """Drop the named columns from the table in one batch, in the order given."""
    with op.batch_alter_table(table) as batch:
        for name in names:
            batch.drop_column(name)


def create_indexes(table: str, *columns: str) -> None:
    """An index on each column, named as `create_all` names an index=True column
    (ix_<table>_<column>), so a migrated database compares equal with the models."""
    for column in columns:
        op.create_index(f"ix_{table}_{column}", table, [column])
