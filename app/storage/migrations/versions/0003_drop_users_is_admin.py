"""Drop users.is_admin: it granted nothing, and nothing has read or set it since.

Created: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa

from app.storage.migrations.steps import add_columns, drop_columns

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    drop_columns("users", "is_admin")


def downgrade() -> None:
    add_columns(
        "users", sa.Column("is_admin", sa.Boolean(), nullable=False, server_default=sa.false())
    )
