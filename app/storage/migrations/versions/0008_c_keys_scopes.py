"""api_keys.scopes (what a key may do beyond its role, e.g. `keys:manage`) and
api_keys.parent_key_id (the key that made it, revoked with it).

Revision ID: 0008
Revises: 0007
Created: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Existing keys keep what they could do by role; none of them gets `keys:manage`.
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(
            sa.Column("scopes", sa.String(200), nullable=False, server_default=sa.text("''"))
        )
        batch.add_column(sa.Column("parent_key_id", sa.String(40), nullable=True))
    op.create_index("ix_api_keys_parent_key_id", "api_keys", ["parent_key_id"])


def downgrade() -> None:
    op.drop_index("ix_api_keys_parent_key_id", "api_keys")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("parent_key_id")
        batch.drop_column("scopes")
