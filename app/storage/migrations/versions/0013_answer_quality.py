"""Answer quality: the per-tenant answer record, feedback on answers, evaluation sets and runs.

Created: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.migrations.columns import string_key, tenant_column, timestamp
from app.storage.migrations.steps import create_indexes

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    op.create_table(
        "answer_records",
        string_key("answer_id", 32),
        tenant_column(),
        sa.Column("user_id", sa.String(40), nullable=False),
        timestamp("created_at"),
        sa.Column("question", sa.Text(), nullable=True),
        sa.Column("refused", sa.Boolean(), nullable=True),
        sa.Column("cache", sa.String(8), nullable=True),
        sa.Column("model", sa.String(200), nullable=True),
        sa.Column("corpus_version", sa.BigInteger(), nullable=True),
        sa.Column("cited", sa.Text(), nullable=True),
        sa.Column("retrieved", sa.Text(), nullable=True),
        sa.Column("timings", sa.Text(), nullable=True),
        sa.Column("total_ms", sa.Float(), nullable=True),
    )
    create_indexes("answer_records", "tenant_id", "user_id", "created_at")
    op.create_table(
        "answer_feedback",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        tenant_column(),
        sa.Column("answer_id", sa.String(32), nullable=False),
        sa.Column("user_id", sa.String(40), nullable=False),
        sa.Column("rating", sa.String(8), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("helpful_markers", sa.Text(), nullable=False),
        sa.Column("expected", sa.Text(), nullable=False),
        timestamp("created_at"),
        timestamp("updated_at"),
        sa.UniqueConstraint("tenant_id", "answer_id", "user_id"),
    )
    create_indexes("answer_feedback", "tenant_id", "answer_id", "updated_at")
    op.create_table(
        "evaluation_sets",
        string_key("set_id", 32),
        tenant_column(),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("items", sa.Text(), nullable=False),
        sa.Column("item_count", sa.Integer(), nullable=False),
        sa.Column("created_by", sa.String(40), nullable=True),
        timestamp("created_at"),
    )
    create_indexes("evaluation_sets", "tenant_id")
    op.create_table(
        "evaluation_runs",
        string_key("run_id", 32),
        tenant_column(),
        sa.Column("set_id", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("answers", sa.Boolean(), nullable=False),
        sa.Column("progress_done", sa.Integer(), nullable=False),
        sa.Column("progress_total", sa.Integer(), nullable=False),
        sa.Column("corpus_version", sa.BigInteger(), nullable=True),
        sa.Column("documents", sa.Text(), nullable=True),
        sa.Column("settings", sa.Text(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("results", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_by", sa.String(40), nullable=True),
        timestamp("created_at"),
        timestamp("updated_at"),
    )
    create_indexes("evaluation_runs", "tenant_id", "set_id", "status", "created_at")


def downgrade() -> None:
    for table in ("evaluation_runs", "evaluation_sets", "answer_feedback", "answer_records"):
        op.drop_table(table)
