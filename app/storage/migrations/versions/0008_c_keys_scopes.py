"""api_keys.scopes (what a key may do beyond its role, e.g. `keys:manage`) and
api_keys.parent_key_id (the key that made it, revoked with it).

Created: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.migrations.steps import add_columns, create_indexes, drop_columns

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    # Existing keys keep what they could do by role; none of them gets `keys:manage`.
    add_columns(
        "api_keys",
        sa.Column("scopes", sa.String(200), nullable=False, server_default=sa.text("''")),
        sa.Column("parent_key_id", sa.String(40), nullable=True),
    )
    create_indexes("api_keys", "parent_key_id")


def downgrade() -> None:
    op.drop_index("ix_api_keys_parent_key_id", "api_keys")
    drop_columns("api_keys", "parent_key_id", "scopes")
