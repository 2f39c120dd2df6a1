"""Single sign-on: each tenant's identity provider, the provider subjects of its users, sign-ins
in flight, one-time exchange codes, and users.break_glass (admins who keep a password when the
tenant turns password sign-in off).

Created: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.migrations.columns import string_key, tenant_column, timestamp
from app.storage.migrations.steps import add_columns, create_indexes, drop_columns

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    add_columns(
        "users", sa.Column("break_glass", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    op.create_table(
        "sso_configs",
        tenant_column(key=True),
        sa.Column("issuer", sa.String(512), nullable=False),
        sa.Column("client_id", sa.String(255), nullable=False),
        sa.Column("client_secret_encrypted", sa.Text(), nullable=False),
        sa.Column("settings", sa.Text(), nullable=False),
        timestamp("updated_at"),
    )
    create_indexes("sso_configs", "issuer")
    op.create_table(
        "sso_identities",
        string_key("user_id", 40),
        tenant_column(),
        sa.Column("issuer", sa.String(512), nullable=False),
        sa.Column("subject", sa.String(255), nullable=False),
        sa.UniqueConstraint("tenant_id", "issuer", "subject", name="uq_sso_identities_subject"),
    )
    create_indexes("sso_identities", "tenant_id")
    op.create_table(
        "sso_pending",
        string_key("state_hash", 64),
        tenant_column(),
        sa.Column("nonce", sa.String(128), nullable=False),
        sa.Column("code_verifier", sa.String(128), nullable=False),
        sa.Column("redirect_uri", sa.String(1024), nullable=False),
        sa.Column("next_path", sa.String(2048), nullable=False),
        timestamp("expires_at"),
    )
    create_indexes("sso_pending", "expires_at")
    op.create_table(
        "sso_exchange_codes",
        string_key("code_hash", 64),
        tenant_column(),
        sa.Column("user_id", sa.String(40), nullable=False),
        timestamp("expires_at"),
    )
    create_indexes("sso_exchange_codes", "expires_at")


def downgrade() -> None:
    op.drop_table("sso_exchange_codes")
    op.drop_table("sso_pending")
    op.drop_table("sso_identities")
    op.drop_table("sso_configs")
    drop_columns("users", "break_glass")
