"""The service database as releases before migrations left it: `create_all` of the models of
the time (users with `is_admin`, chunks with or without `page_role`), no version table, and one
row in every table. Written out here, not taken from the migrations, so the tests of those
migrations compare them with an independent copy of what older releases made.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy import Engine

UPLOADED = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)
PASSWORD_HASH = "$2b$12$" + "x" * 53


def legacy_metadata(with_page_role: bool) -> sa.MetaData:
    """The tables of a release from before migrations (`with_page_role`: after chunks got it)."""
    metadata = sa.MetaData()
    utc = sa.DateTime(timezone=True)
    sa.Table(
        "users",
        metadata,
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("tenant_id", sa.String(64), nullable=False, index=True),
        sa.Column("username", sa.String(64), nullable=False, unique=True),
        sa.Column("password_hash", sa.String(128), nullable=False),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("created_at", utc, nullable=False),
    )
    sa.Table(
        "documents",
        metadata,
        sa.Column("tenant_id", sa.String(64), primary_key=True),
        sa.Column("document_id", sa.String(64), primary_key=True),
        sa.Column("source", sa.String(255), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("pages", sa.Integer(), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("content_sha256", sa.String(64), nullable=False),
        sa.Column("uploaded_at", utc, nullable=False, index=True),
        sa.Column("updated_at", utc, nullable=False),
    )
    chunk_columns = [
        sa.Column("tenant_id", sa.String(64), primary_key=True),
        sa.Column("chunk_id", sa.String(64), primary_key=True),
        sa.Column("document_id", sa.String(64), nullable=False, index=True),
        sa.Column("source", sa.String(255), nullable=False),
        sa.Column("page", sa.Integer(), nullable=False),
        sa.Column("page_label", sa.String(64), nullable=False),
        sa.Column("chunk_index", sa.Integer(), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("end", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("extra", sa.Text(), nullable=False),
    ]
    if with_page_role:
        chunk_columns.append(sa.Column("page_role", sa.String(32), nullable=True))
    sa.Table("chunks", metadata, *chunk_columns)
    sa.Table(
        "corpus_versions",
        metadata,
        sa.Column("tenant_id", sa.String(64), primary_key=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
    )
    sa.Table(
        "jobs",
        metadata,
        sa.Column("job_id", sa.String(40), primary_key=True),
        sa.Column("tenant_id", sa.String(64), nullable=False, index=True),
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
        sa.Column("created_at", utc, nullable=False, index=True),
        sa.Column("updated_at", utc, nullable=False),
    )
    sa.Table(
        "job_tenant_turns",
        metadata,
        sa.Column("tenant_id", sa.String(64), primary_key=True),
        sa.Column("served_at", utc, nullable=False),
    )
    sa.Table(
        "job_batch_members",
        metadata,
        sa.Column("job_id", sa.String(40), primary_key=True),
        sa.Column("batch_id", sa.String(40), nullable=False, index=True),
    )
    return metadata


def create_legacy_database(engine: Engine, with_page_role: bool) -> None:
    """Create the old tables and put one row in each (a chunk of a done document, a queued job
    of another document, a user)."""
    metadata = legacy_metadata(with_page_role)
    metadata.create_all(engine)
    tables = metadata.tables
    chunk = {
        "tenant_id": "acme",
        "chunk_id": "c-old",
        "document_id": "manual",
        "source": "manual.pdf",
        "page": 2,
        "page_label": "ii",
        "chunk_index": 0,
        "start": 0,
        "end": 14,
        "text": "old chunk text",
        "extra": '{"section": "Valves"}',
    }
    if with_page_role:
        chunk["page_role"] = "contents"
    job = {
        "job_id": "job_old",
        "tenant_id": "acme",
        "document_id": "pumps",
        "source": "pumps.pdf",
        "stored_path": "/data/uploads/acme/job_old.pdf",
        "size_bytes": 2048,
        "status": "queued",
        "progress_done": 0,
        "progress_total": 0,
        "progress_stage": "queued",
        "chunks_indexed": 0,
        "pages": 0,
        "error": None,
        "attempts": 0,
        "created_at": UPLOADED,
        "updated_at": UPLOADED,
    }
    with engine.begin() as connection:
        connection.execute(
            tables["users"].insert(),
            {
                "id": "usr_old",
                "tenant_id": "acme",
                "username": "alice",
                "password_hash": PASSWORD_HASH,
                "is_admin": False,
                "created_at": UPLOADED,
            },
        )
        connection.execute(
            tables["documents"].insert(),
            {
                "tenant_id": "acme",
                "document_id": "manual",
                "source": "manual.pdf",
                "status": "done",
                "pages": 3,
                "chunks": 1,
                "size_bytes": 4096,
                "content_sha256": "ab" * 32,
                "uploaded_at": UPLOADED,
                "updated_at": UPLOADED,
            },
        )
        connection.execute(tables["chunks"].insert(), chunk)
        connection.execute(tables["corpus_versions"].insert(), {"tenant_id": "acme", "version": 7})
        connection.execute(tables["jobs"].insert(), job)
        connection.execute(
            tables["job_tenant_turns"].insert(), {"tenant_id": "acme", "served_at": UPLOADED}
        )
        connection.execute(
            tables["job_batch_members"].insert(), {"job_id": "job_done", "batch_id": "job_done"}
        )
