"""Conversations and their messages (POST /conversations, follow-up questions).

Created: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.migrations.steps import create_indexes

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    utc = sa.DateTime(timezone=True)
    op.create_table(
        "conversations",
        sa.Column("conversation_id", sa.String(32), primary_key=True),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("title", sa.String(120), nullable=False),
        sa.Column("created_at", utc, nullable=False),
        sa.Column("updated_at", utc, nullable=False),
    )
    create_indexes("conversations", "tenant_id", "user_id", "updated_at")
    op.create_table(
        "conversation_messages",
        sa.Column("message_id", sa.String(32), primary_key=True),
        sa.Column("conversation_id", sa.String(32), nullable=False),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("standalone_question", sa.Text(), nullable=True),
        sa.Column("citations_json", sa.Text(), nullable=True),
        sa.Column("refused", sa.Boolean(), nullable=True),
        sa.Column("created_at", utc, nullable=False),
        sa.UniqueConstraint("conversation_id", "seq"),
    )
    create_indexes("conversation_messages", "conversation_id")


def downgrade() -> None:
    op.drop_table("conversation_messages")
    op.drop_table("conversations")
