"""Conversations and their messages (POST /conversations, follow-up questions).

Created: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.migrations.columns import string_key, tenant_column, timestamp
from app.storage.migrations.steps import create_indexes

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.create_table(
        "conversations",
        string_key("conversation_id", 32),
        tenant_column(),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("title", sa.String(120), nullable=False),
        timestamp("created_at"),
        timestamp("updated_at"),
    )
    create_indexes("conversations", "tenant_id", "user_id", "updated_at")
    op.create_table(
        "conversation_messages",
        string_key("message_id", 32),
        sa.Column("conversation_id", sa.String(32), nullable=False),
        tenant_column(),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("standalone_question", sa.Text(), nullable=True),
        sa.Column("citations_json", sa.Text(), nullable=True),
        sa.Column("refused", sa.Boolean(), nullable=True),
        timestamp("created_at"),
        sa.UniqueConstraint("conversation_id", "seq"),
    )
    create_indexes("conversation_messages", "conversation_id")


def downgrade() -> None:
    op.drop_table("conversation_messages")
    op.drop_table("conversations")
