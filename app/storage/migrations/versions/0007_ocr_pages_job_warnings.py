"""documents.ocr_pages (the OCR page quota) and jobs.warnings (pages OCR could not read).

Revision ID: 0007
Revises: 0006
Created: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.add_column(sa.Column("ocr_pages", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("warnings", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("warnings")
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("ocr_pages")
