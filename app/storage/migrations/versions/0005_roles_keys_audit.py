"""Tenant administration: user roles (every existing user becomes admin), disabled users and
session versions, documents' uploader, API keys (keyed hashes only), revoked tokens, audit log.

Created: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.migrations.columns import string_key, tenant_column, timestamp
from app.storage.migrations.steps import add_columns, create_indexes, drop_columns

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    add_columns(
        "users",
        sa.Column("role", sa.String(16), nullable=False, server_default="member"),
        sa.Column("disabled", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("session_version", sa.Integer(), nullable=False, server_default=sa.text("0")),
    )
    # Before roles every user could do everything: keep it so, the tenant's admins decide later.
    op.execute(sa.text("UPDATE users SET role = 'admin'"))
    add_columns("documents", sa.Column("uploaded_by", sa.String(40), nullable=True))
    op.create_table(
        "api_keys",
        string_key("key_id", 40),
        tenant_column(),
        sa.Column("user_id", sa.String(40), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        timestamp("created_at"),
        timestamp("expires_at", nullable=True),
        timestamp("last_used_at", nullable=True),
    )
    create_indexes("api_keys", "tenant_id", "user_id")
    op.create_table(
        "revoked_tokens",
        string_key("jti", 64),
        timestamp("expires_at"),
    )
    create_indexes("revoked_tokens", "expires_at")
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        tenant_column(),
        timestamp("at"),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("user_id", sa.String(40), nullable=True),
        sa.Column("target_id", sa.String(64), nullable=True),
        sa.Column("client_ip", sa.String(64), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
    )
    create_indexes("audit_log", "tenant_id", "at")


def downgrade() -> None:
    op.drop_table("audit_log")
    op.drop_table("revoked_tokens")
    op.drop_table("api_keys")
    drop_columns("documents", "uploaded_by")
    drop_columns("users", "session_version", "disabled", "role")
