"""Evaluation runs record the collections their starter's credential read (the run's scope).

A run searches and answers within them (narrowed by what its starter reads when it executes),
and only callers who read all of them see the run. Runs made before hold none: only callers who
read every collection of the tenant see those.

Revision ID: 0015
Revises: 0014
Created: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("evaluation_runs") as batch:
        batch.add_column(sa.Column("collections", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("evaluation_runs") as batch:
        batch.drop_column("collections")
