"""chunks.page_role: the role of the chunk's page (contents, index, ...); NULL for content pages.

Releases before migrations added this column at start-up, so a database may have it already.

Created: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.migrations.steps import add_columns, drop_columns

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    present = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("chunks")}
    if "page_role" in present:
        return
    add_columns("chunks", sa.Column("page_role", sa.String(32), nullable=True))


def downgrade() -> None:
    drop_columns("chunks", "page_role")
