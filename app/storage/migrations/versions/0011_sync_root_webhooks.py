"""documents.sync_root (the folder label of `rag sync`), and the webhooks and their deliveries.

Created: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.migrations.columns import string_key, tenant_column, timestamp
from app.storage.migrations.steps import add_columns, create_indexes, drop_columns

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    add_columns("documents", sa.Column("sync_root", sa.String(100), nullable=True))
    op.create_table(
        "webhooks",
        string_key("webhook_id", 40),
        tenant_column(),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("events", sa.Text(), nullable=False),
        sa.Column("description", sa.String(500), nullable=True),
        sa.Column("secret", sa.String(200), nullable=False),
        sa.Column("created_by", sa.String(40), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("disabled_reason", sa.String(200), nullable=True),
        timestamp("created_at"),
        timestamp("updated_at"),
    )
    create_indexes("webhooks", "tenant_id")
    op.create_table(
        "webhook_deliveries",
        string_key("delivery_id", 40),
        sa.Column("webhook_id", sa.String(40), nullable=False),
        tenant_column(),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        timestamp("next_attempt_at"),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.String(500), nullable=True),
        timestamp("created_at"),
        timestamp("updated_at"),
    )
    create_indexes("webhook_deliveries", "webhook_id", "tenant_id", "status", "next_attempt_at")


def downgrade() -> None:
    op.drop_table("webhook_deliveries")
    op.drop_table("webhooks")
    drop_columns("documents", "sync_root")
