"""A document is one name in one collection: two collections may each hold `handbook.pdf`; and
jobs that are not uploads (deleting a collection with its documents).

Until now a document's id was derived from its tenant and name alone, so a name was unique per
tenant. Existing documents keep their ids (and so their chunk ids, citations and URLs); what
changes is the key a re-upload replaces by, (tenant, collection, name), which this constraint
makes the database hold. Existing rows satisfy it: their names were unique per tenant.

Documents gain the language detected in their text when indexed (NULL for those indexed
before: a `language` filter leaves them out until they are uploaded again). Jobs gain their
kind (`index` for every existing one), the collection a `collection_delete` job deletes, and
who asked for it.

Created: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.migrations.steps import add_columns, drop_columns

revision = "0016"
down_revision = "0015"

NAME = "uq_documents_tenant_collection_source"


def upgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.create_unique_constraint(NAME, ["tenant_id", "collection_id", "source"])
        batch.add_column(sa.Column("language", sa.String(8), nullable=True))
    add_columns(
        "jobs",
        sa.Column("kind", sa.String(24), nullable=False, server_default="index"),
        sa.Column("collection_id", sa.String(40), nullable=True),
        sa.Column("requested_by", sa.String(40), nullable=True),
    )


def downgrade() -> None:
    drop_columns("jobs", "requested_by", "collection_id", "kind")
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("language")
        batch.drop_constraint(NAME, type_="unique")
