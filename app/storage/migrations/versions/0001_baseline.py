"""Baseline: the tables as `create_all` made them before migrations, without chunks.page_role.

A database from before migrations has some or all of these tables already (each release created
the ones it lacked at start-up), so each is created only when missing; its rows stay as they are.

Created: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.migrations.columns import string_key, tenant_column, timestamp

revision = "0001"
down_revision = None


def _tables() -> list[sa.Table]:
    # Frozen copies of the models at this revision (the app's models move on without them).
    # index=True gives create_all's index names (ix_<table>_<column>), as older databases have.
    metadata = sa.MetaData()
    users = sa.Table(
        "users",
        metadata,
        string_key("id", 40),
        tenant_column(index=True),
        sa.Column("username", sa.String(64), nullable=False, unique=True),
        sa.Column("password_hash", sa.String(128), nullable=False),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        timestamp("created_at"),
    )
    documents = sa.Table(
        "documents",
        metadata,
        tenant_column(key=True),
        string_key("document_id", 64),
        sa.Column("source", sa.String(255), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("pages", sa.Integer(), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("content_sha256", sa.String(64), nullable=False),
        timestamp("uploaded_at", index=True),
        timestamp("updated_at"),
    )
    chunks = sa.Table(
        "chunks",
        metadata,
        tenant_column(key=True),
        string_key("chunk_id", 64),
        sa.Column("document_id", sa.String(64), nullable=False, index=True),
        sa.Column("source", sa.String(255), nullable=False),
        sa.Column("page", sa.Integer(), nullable=False),
        sa.Column("page_label", sa.String(64), nullable=False),
        sa.Column("chunk_index", sa.Integer(), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("end", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("extra", sa.Text(), nullable=False),
    )
    corpus_versions = sa.Table(
        "corpus_versions",
        metadata,
        tenant_column(key=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
    )
    jobs = sa.Table(
        "jobs",
        metadata,
        string_key("job_id", 40),
        tenant_column(index=True),
        sa.Column("document_id", sa.String(64), nullable=False),
        sa.Column("source", sa.String(255), nullable=False),
        sa.Column("stored_path", sa.String(1024), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("progress_done", sa.Integer(), nullable=False),
        sa.Column("progress_total", sa.Integer(), nullable=False),
        sa.Column("progress_stage", sa.String(32), nullable=False),
        sa.Column("chunks_indexed", sa.Integer(), nullable=False),
        sa.Column("pages", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        timestamp("created_at", index=True),
        timestamp("updated_at"),
    )
    turns = sa.Table(
        "job_tenant_turns",
        metadata,
        tenant_column(key=True),
        timestamp("served_at"),
    )
    batch_members = sa.Table(
        "job_batch_members",
        metadata,
        string_key("job_id", 40),
        sa.Column("batch_id", sa.String(40), nullable=False, index=True),
    )
    return [users, documents, chunks, corpus_versions, jobs, turns, batch_members]


def upgrade() -> None:
    bind = op.get_bind()
    existing = set(sa.inspect(bind).get_table_names())
    for table in _tables():
        if table.name not in existing:
            table.create(bind)  # with its indexes


def downgrade() -> None:
    for table in reversed(_tables()):
        op.drop_table(table.name)
