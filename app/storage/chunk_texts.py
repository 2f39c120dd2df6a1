"""The text of every chunk, in the service database; Chroma keeps the vectors and locations.

Why not in Chroma: storing a chunk's text there costs ~2 ms per chunk (a 16-chunk upsert of
~770-character texts: 50 ms with the texts, 19 ms without; the same with Chroma's full-text index
disabled), more than a third of what embedding the chunk costs. Here a 16-row insert takes
~0.4 ms on SQLite and ~1.4 ms on PostgreSQL (bench/README.md, ingestion section).

Rows are keyed by (tenant, chunk id). Chunk ids hash the text, so a row never changes once
written: writes insert or skip. Every read names the tenant, so one tenant's text can never be
returned for another's id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import ColumnElement, String, Text, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Mapped, mapped_column

from app.domain import Chunk
from app.storage.db import Base, Database

# Ids per statement: below SQLite's bound-parameter limit, and short statements for PostgreSQL.
_IDS_PER_STATEMENT = 500


class ChunkTextRow(Base):
    __tablename__ = "chunk_texts"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    chunk_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    document_id: Mapped[str] = mapped_column(String(64), index=True)
    text: Mapped[str] = mapped_column(Text)


class ChunkTextStore:
    """Tenant-scoped chunk texts: written with the chunks' vectors, read by chunk id."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def put(self, chunks: Sequence[Chunk]) -> None:
        """Store the texts of these chunks; chunks already stored are left as they are."""
        if not chunks:
            return
        insert = postgresql.insert if self._db.dialect == "postgresql" else sqlite.insert
        rows = [
            {
                "tenant_id": chunk.tenant_id,
                "chunk_id": chunk.id,
                "document_id": chunk.document_id,
                "text": chunk.text,
            }
            for chunk in chunks
        ]
        with self._db.session() as session:
            session.execute(insert(ChunkTextRow).on_conflict_do_nothing(), rows)

    def get(self, tenant_id: str, chunk_ids: Iterable[str]) -> dict[str, str]:
        """Chunk id -> text for the ids this tenant has (others are simply absent)."""
        wanted = list(dict.fromkeys(chunk_ids))
        found: dict[str, str] = {}
        with self._db.session() as session:
            for begin in range(0, len(wanted), _IDS_PER_STATEMENT):
                part = wanted[begin : begin + _IDS_PER_STATEMENT]
                rows = session.execute(
                    select(ChunkTextRow.chunk_id, ChunkTextRow.text).where(
                        ChunkTextRow.tenant_id == tenant_id, ChunkTextRow.chunk_id.in_(part)
                    )
                )
                found.update((str(cid), str(text)) for cid, text in rows)
        return found

    def document_chunk_ids(self, tenant_id: str, document_id: str) -> list[str]:
        """Ids of the stored chunks of one document."""
        with self._db.session() as session:
            return list(
                session.scalars(
                    select(ChunkTextRow.chunk_id).where(
                        ChunkTextRow.tenant_id == tenant_id,
                        ChunkTextRow.document_id == document_id,
                    )
                )
            )

    def delete(self, tenant_id: str, chunk_ids: Sequence[str]) -> None:
        """Remove these chunks' texts."""
        with self._db.session() as session:
            for begin in range(0, len(chunk_ids), _IDS_PER_STATEMENT):
                part = list(chunk_ids[begin : begin + _IDS_PER_STATEMENT])
                session.execute(
                    delete(ChunkTextRow).where(
                        ChunkTextRow.tenant_id == tenant_id, ChunkTextRow.chunk_id.in_(part)
                    )
                )

    def delete_document(self, tenant_id: str, document_id: str) -> None:
        """Remove every text of one document."""
        with self._db.session() as session:
            session.execute(
                delete(ChunkTextRow).where(
                    ChunkTextRow.tenant_id == tenant_id, ChunkTextRow.document_id == document_id
                )
            )

    def drop_tenant(self, tenant_id: str) -> None:
        """Remove every text of the tenant."""
        with self._db.session() as session:
            session.execute(delete(ChunkTextRow).where(ChunkTextRow.tenant_id == tenant_id))

    def find_containing(self, tenant_id: str, needle: str, limit: int) -> list[str]:
        """Ids of up to `limit` of the tenant's chunks whose text contains `needle` exactly
        (case-sensitive). A scan of the tenant's texts: ~20 ms per 10k chunks."""
        if not needle or limit <= 0:
            return []
        with self._db.session() as session:
            return list(
                session.scalars(
                    select(ChunkTextRow.chunk_id)
                    .where(ChunkTextRow.tenant_id == tenant_id, self._contains(needle))
                    .order_by(ChunkTextRow.chunk_id)
                    .limit(limit)
                )
            )

    def _contains(self, needle: str) -> ColumnElement[bool]:
        # Position functions, not LIKE: SQLite's LIKE ignores ASCII case, and a needle holding
        # `%` or `_` would need escaping.
        position = func.strpos if self._db.dialect == "postgresql" else func.instr
        return position(ChunkTextRow.text, needle) > 0
