"""documents.ocr_pages (the OCR page quota) and jobs.warnings (pages OCR could not read).

Created: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa

from app.storage.migrations.steps import add_columns, drop_columns

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    add_columns(
        "documents", sa.Column("ocr_pages", sa.Integer(), nullable=False, server_default="0")
    )
    add_columns("jobs", sa.Column("warnings", sa.Text(), nullable=True))


def downgrade() -> None:
    drop_columns("jobs", "warnings")
    drop_columns("documents", "ocr_pages")
