"""Evaluation runs record the collections their starter's credential read (the run's scope).

A run searches and answers within them (narrowed by what its starter reads when it executes),
and only callers who read all of them see the run. Runs made before hold none: only callers who
read every collection of the tenant see those.

Created: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa

from app.storage.migrations.steps import add_columns, drop_columns

revision = "0015"
down_revision = "0014"


def upgrade() -> None:
    add_columns("evaluation_runs", sa.Column("collections", sa.Text(), nullable=True))


def downgrade() -> None:
    drop_columns("evaluation_runs", "collections")
