"""chunks.page_role: the role of the chunk's page (contents, index, ...); NULL for content pages.

Releases before migrations added this column at start-up, so a database may have it already.

Revision ID: 0002
Revises: 0001
Created: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    present = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("chunks")}
    if "page_role" in present:
        return
    with op.batch_alter_table("chunks") as batch:
        batch.add_column(sa.Column("page_role", sa.String(32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chunks") as batch:
        batch.drop_column("page_role")
