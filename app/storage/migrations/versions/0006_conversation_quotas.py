"""conversation_messages.size_bytes and an index on its tenant: the conversation_bytes quota.

Messages stored before this revision are measured here, in UTF-8 bytes like new ones.

Created: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.migrations.steps import add_columns

revision = "0006"
down_revision = "0005"

_MEASURED = ("content", "standalone_question", "citations_json")


def _utf8_bytes(column: str, dialect: str) -> str:
    # SQLite's length() counts characters unless it is given a blob.
    measure = (
        f"octet_length({column})" if dialect == "postgresql" else f"length(CAST({column} AS BLOB))"
    )
    return f"coalesce({measure}, 0)"


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    add_columns("conversation_messages", sa.Column("size_bytes", sa.Integer(), nullable=True))
    total = " + ".join(_utf8_bytes(column, dialect) for column in _MEASURED)
    op.execute(f"UPDATE conversation_messages SET size_bytes = {total}")
    with op.batch_alter_table("conversation_messages") as batch:
        batch.alter_column("size_bytes", existing_type=sa.Integer(), nullable=False)
        batch.create_index("ix_conversation_messages_tenant_id", ["tenant_id"])


def downgrade() -> None:
    with op.batch_alter_table("conversation_messages") as batch:
        batch.drop_index("ix_conversation_messages_tenant_id")
        batch.drop_column("size_bytes")
