"""The job tables: jobs, when each tenant was last served, and which running jobs share a batch."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.storage.db import Base, UTCDateTime

# The stage of a job put back after a transient failure: only its own delayed message claims it.
RETRYING = "retrying"


class JobRow(Base):
    __tablename__ = "jobs"

    job_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    document_id: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(255))
    stored_path: Mapped[str] = mapped_column(String(1024))
    size_bytes: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), index=True)
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    progress_stage: Mapped[str] = mapped_column(String(32), default="queued")
    chunks_indexed: Mapped[int] = mapped_column(Integer, default=0)
    pages: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class TenantTurnRow(Base):
    """When each tenant last had a job claimed: the tie-break of fair scheduling."""

    __tablename__ = "job_tenant_turns"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    served_at: Mapped[datetime] = mapped_column(UTCDateTime())


class BatchMemberRow(Base):
    """A processing job that was claimed in a batch, and the batch (its first job's id)."""

    __tablename__ = "job_batch_members"

    job_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    batch_id: Mapped[str] = mapped_column(String(40), index=True)
