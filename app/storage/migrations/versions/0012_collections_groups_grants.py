"""Collections, groups and grants: who may read what inside a tenant, and document metadata.

Every tenant that has a user or a document gets its `general` collection (visibility `tenant`:
every user reads it), and every existing document lands in it, so nothing changes for a tenant
until it uses collections. API keys gain an optional list of collections they are limited to.

Created: 2026-12-05
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from app.storage.migrations.columns import string_key, tenant_column, timestamp
from app.storage.migrations.steps import add_columns, create_indexes, drop_columns

revision = "0012"
down_revision = "0011"

GENERAL = "general"


def upgrade() -> None:
    op.create_table(
        "collections",
        tenant_column(key=True),
        string_key("collection_id", 40),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("description", sa.String(500), nullable=False, server_default=sa.text("''")),
        sa.Column("visibility", sa.String(16), nullable=False, server_default="tenant"),
        timestamp("created_at"),
        timestamp("updated_at"),
        sa.UniqueConstraint("tenant_id", "name", name="uq_collections_tenant_id_name"),
    )
    op.create_table(
        "user_groups",
        tenant_column(key=True),
        string_key("group_id", 40),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("description", sa.String(500), nullable=False, server_default=sa.text("''")),
        timestamp("created_at"),
        sa.UniqueConstraint("tenant_id", "name", name="uq_user_groups_tenant_id_name"),
    )
    op.create_table(
        "group_members",
        tenant_column(key=True),
        string_key("group_id", 40),
        string_key("user_id", 40),
    )
    create_indexes("group_members", "user_id")
    op.create_table(
        "collection_grants",
        tenant_column(key=True),
        string_key("collection_id", 40),
        string_key("principal_kind", 8),
        string_key("principal_id", 40),
        sa.Column("permission", sa.String(8), nullable=False),
    )
    op.create_table(
        "access_versions",
        tenant_column(key=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
    )
    add_columns(
        "documents",
        sa.Column("collection_id", sa.String(40), nullable=False, server_default=GENERAL),
        sa.Column("metadata_json", sa.Text(), nullable=False, server_default=sa.text("'{}'")),
    )
    create_indexes("documents", "collection_id")
    add_columns("api_keys", sa.Column("collections", sa.Text(), nullable=True))
    _create_general_collections()


def _create_general_collections() -> None:
    """A `general` collection for every tenant that has a user or a document."""
    connection = op.get_bind()
    tenants = {
        tenant
        for table in ("users", "documents")
        for (tenant,) in connection.execute(sa.text(f"SELECT DISTINCT tenant_id FROM {table}"))
    }
    collections = sa.table(
        "collections",
        sa.column("tenant_id", sa.String),
        sa.column("collection_id", sa.String),
        sa.column("name", sa.String),
        sa.column("description", sa.String),
        sa.column("visibility", sa.String),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("updated_at", sa.DateTime(timezone=True)),
    )
    now = datetime.now(UTC)
    for tenant in sorted(tenants):
        connection.execute(
            sa.insert(collections).values(
                tenant_id=tenant,
                collection_id=GENERAL,
                name=GENERAL,
                description="",
                visibility="tenant",
                created_at=now,
                updated_at=now,
            )
        )


def downgrade() -> None:
    drop_columns("api_keys", "collections")
    op.drop_index("ix_documents_collection_id", "documents")
    drop_columns("documents", "metadata_json", "collection_id")
    op.drop_table("access_versions")
    op.drop_table("collection_grants")
    op.drop_index("ix_group_members_user_id", "group_members")
    op.drop_table("group_members")
    op.drop_table("user_groups")
    op.drop_table("collections")
