"""Chunk records and tenant corpus versions in the service database; Chroma holds the vectors.

A chunk's record (text, source, page, page label, offsets, extra metadata) lives here, keyed by
(tenant, chunk id); Chroma keeps only its vector and the two keys deletes filter on. Why: storing
texts and location metadata in Chroma cost ~2.5 ms per chunk (a 16-chunk upsert of ~770-char
texts: 50 ms with them, 10 ms without; the same with Chroma's full-text index disabled), half of
what embedding the chunk costs, where a 16-row insert here takes ~0.4 ms on SQLite and ~1.4 ms on
PostgreSQL (bench/README.md, ingestion section).

The rows are the truth about which chunks exist: a document's rows are written after its vectors
and deleted before them, in one transaction with the tenant's corpus version, so a reader sees a
document whole or not at all, and a vector whose write was interrupted has no row and is never
returned. Every read names the tenant, so one tenant's chunk can never come back for another.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import cast

from sqlalchemy import ColumnElement, Select, delete, func, select
from sqlalchemy.orm import Session

from app.domain import PAGE_ROLES, Chunk, PageRole
from app.storage.db import DatabaseStore, affected_rows, conflict_insert
from app.storage.records import count_rows, record_of
from app.storage.tables import ChunkRow, CorpusVersionRow, DocumentRow

# Ids per statement: below SQLite's bound-parameter limit, and short statements for PostgreSQL.
_IDS_PER_STATEMENT = 500
PAGE_SIZE = 1000


def _values(chunk: Chunk) -> dict[str, object]:
    return {
        "tenant_id": chunk.tenant_id,
        "chunk_id": chunk.id,
        "document_id": chunk.document_id,
        "source": chunk.source,
        "page": chunk.page,
        "page_label": chunk.page_label,
        "chunk_index": chunk.chunk_index,
        "start": chunk.start,
        "end": chunk.end,
        "text": chunk.text,
        "extra": json.dumps(chunk.metadata, ensure_ascii=False, sort_keys=True),
        "page_role": chunk.page_role,
    }


def _chunk(row: ChunkRow) -> Chunk:
    return record_of(
        Chunk,
        row,
        id=row.chunk_id,
        metadata=json.loads(row.extra),
        page_role=_page_role(row.page_role),
    )


def _page_role(value: str | None) -> PageRole | None:
    # A role this version does not know (written by a newer one) reads as a content page.
    return cast("PageRole", value) if value in PAGE_ROLES else None


class ChunkStore(DatabaseStore):
    """Tenant-scoped chunk records and corpus versions."""

    # --- writes (each one transaction, bumping the tenant's corpus version) ---

    def write_documents(self, tenant_id: str, contents: Mapping[str, Sequence[Chunk]]) -> list[str]:
        """Make each document's chunks its whole content, in one transaction and one version bump;
        returns the ids of the chunks they no longer have (their vectors are the caller's to
        delete)."""
        keep = {chunk.id for chunks in contents.values() for chunk in chunks}
        document_ids = list(contents)
        with self._db.session() as session:
            # One insert and one read for the whole batch, not two statements per document.
            self._insert_rows(session, [chunk for chunks in contents.values() for chunk in chunks])
            obsolete: list[str] = []
            for begin in range(0, len(document_ids), _IDS_PER_STATEMENT):
                existing = session.scalars(
                    select(ChunkRow.chunk_id).where(
                        ChunkRow.tenant_id == tenant_id,
                        ChunkRow.document_id.in_(document_ids[begin : begin + _IDS_PER_STATEMENT]),
                    )
                )
                obsolete += [cid for cid in existing if cid not in keep]
            self._delete_ids(session, tenant_id, obsolete)
            self._bump(session, tenant_id)
        return obsolete

    def add(self, chunks: Sequence[Chunk]) -> None:
        """Insert records (existing ones are kept), for moving chunks in from an old layout; the
        caller bumps the version once it has moved them all."""
        with self._db.session() as session:
            self._insert_rows(session, chunks)

    def delete_document(self, tenant_id: str, document_id: str) -> int:
        """Remove a document's records; returns how many there were."""
        with self._db.session() as session:
            count = affected_rows(
                session,
                delete(ChunkRow).where(
                    ChunkRow.tenant_id == tenant_id, ChunkRow.document_id == document_id
                ),
            )
            if count:
                self._bump(session, tenant_id)
            return count

    def bump_version(self, tenant_id: str) -> int:
        """Mark the tenant's corpus as changed (indexes and cached answers go stale); returns
        the new version, which no other bump of this tenant ever returns."""
        with self._db.session() as session:
            return self._bump(session, tenant_id)

    # --- reads ---

    def get(self, tenant_id: str, chunk_ids: Iterable[str]) -> list[Chunk]:
        """The tenant's chunks with these ids, in the given order; unknown ids are skipped."""
        wanted = list(dict.fromkeys(chunk_ids))
        found: dict[str, Chunk] = {}
        with self._db.session() as session:
            for begin in range(0, len(wanted), _IDS_PER_STATEMENT):
                part = wanted[begin : begin + _IDS_PER_STATEMENT]
                rows = session.scalars(
                    select(ChunkRow).where(
                        ChunkRow.tenant_id == tenant_id, ChunkRow.chunk_id.in_(part)
                    )
                )
                found.update((row.chunk_id, _chunk(row)) for row in rows)
        return [found[cid] for cid in wanted if cid in found]

    def page_chunks(self, tenant_id: str, document_id: str, page: int) -> list[Chunk]:
        """The tenant's chunks of one page of one document, in reading order."""
        with self._db.session() as session:
            rows = session.scalars(
                select(ChunkRow)
                .where(
                    ChunkRow.tenant_id == tenant_id,
                    ChunkRow.document_id == document_id,
                    ChunkRow.page == page,
                )
                .order_by(ChunkRow.start, ChunkRow.chunk_index)
            )
            return [_chunk(row) for row in rows]

    def ids(self, tenant_id: str) -> list[str]:
        """Every chunk id of the tenant."""
        with self._db.session() as session:
            return list(
                session.scalars(select(ChunkRow.chunk_id).where(ChunkRow.tenant_id == tenant_id))
            )

    def iter_tenant(self, tenant_id: str) -> Iterator[Chunk]:
        """Every chunk of the tenant, PAGE_SIZE at a time in id order (keyset, not offset)."""
        after = ""
        while True:
            with self._db.session() as session:
                page = [
                    _chunk(row)
                    for row in session.scalars(
                        select(ChunkRow)
                        .where(ChunkRow.tenant_id == tenant_id, ChunkRow.chunk_id > after)
                        .order_by(ChunkRow.chunk_id)
                        .limit(PAGE_SIZE)
                    )
                ]
            yield from page
            if len(page) < PAGE_SIZE:
                # The last page: asking again could find a chunk written meanwhile and mix two
                # versions of a document into one pass.
                return
            after = page[-1].id

    def find_containing(
        self,
        tenant_id: str,
        needle: str,
        limit: int,
        documents: Collection[str] | None = None,
        chunk_ids: Collection[str] | None = None,
    ) -> list[Chunk]:
        """Up to `limit` of the tenant's chunks whose text contains `needle` exactly
        (case-sensitive), only among these documents and these chunks when given. A scan of
        the tenant's texts: ~20 ms per 10k chunks."""
        if not needle or limit <= 0:
            return []
        if (documents is not None and not documents) or (chunk_ids is not None and not chunk_ids):
            return []
        where = [ChunkRow.tenant_id == tenant_id, self._contains(needle)]
        if documents is not None:
            where.append(ChunkRow.document_id.in_(sorted(documents)))
        if chunk_ids is not None:
            where.append(ChunkRow.chunk_id.in_(sorted(chunk_ids)))
        with self._db.session() as session:
            rows = session.scalars(
                select(ChunkRow).where(*where).order_by(ChunkRow.chunk_id).limit(limit)
            )
            return [_chunk(row) for row in rows]

    def owners(self, tenant_id: str) -> list[tuple[str, str, int]]:
        """(chunk id, document id, page) of every chunk of the tenant, without texts."""
        with self._db.session() as session:
            rows = session.execute(
                select(ChunkRow.chunk_id, ChunkRow.document_id, ChunkRow.page).where(
                    ChunkRow.tenant_id == tenant_id
                )
            )
            return [(cid, doc, int(page)) for cid, doc, page in rows]

    def documents_in_language(self, tenant_id: str, language: str) -> set[str]:
        """The ids of the tenant's documents whose recorded language is `language`."""
        with self._db.session() as session:
            return set(session.scalars(self._in_language(tenant_id, language)))

    def count_in_language(self, tenant_id: str, language: str) -> int:
        """How many chunks the tenant's documents of this recorded language have."""
        with self._db.session() as session:
            return count_rows(
                session,
                ChunkRow,
                ChunkRow.tenant_id == tenant_id,
                ChunkRow.document_id.in_(self._in_language(tenant_id, language)),
            )

    @staticmethod
    def _in_language(tenant_id: str, language: str) -> Select[str]:
        return select(DocumentRow.document_id).where(
            DocumentRow.tenant_id == tenant_id, DocumentRow.language == language
        )

    def version(self, tenant_id: str) -> int:
        """The tenant's corpus version: 0 before its first write, then larger after every change."""
        with self._db.session() as session:
            version = session.scalar(
                select(CorpusVersionRow.version).where(CorpusVersionRow.tenant_id == tenant_id)
            )
            return int(version or 0)

    # --- internals ---

    def _insert_rows(self, session: Session, chunks: Sequence[Chunk]) -> None:
        if chunks:
            insert = conflict_insert(self._db.dialect, ChunkRow).on_conflict_do_nothing()
            session.execute(insert, [_values(chunk) for chunk in chunks])

    def _delete_ids(self, session: Session, tenant_id: str, chunk_ids: Sequence[str]) -> None:
        for begin in range(0, len(chunk_ids), _IDS_PER_STATEMENT):
            part = list(chunk_ids[begin : begin + _IDS_PER_STATEMENT])
            session.execute(
                delete(ChunkRow).where(ChunkRow.tenant_id == tenant_id, ChunkRow.chunk_id.in_(part))
            )

    def _bump(self, session: Session, tenant_id: str) -> int:
        # One atomic statement, so concurrent writers (threads or processes) never share a
        # version. The nanosecond clock as a floor keeps versions from ever repeating, even
        # after the table was restored or reset while caches keyed by version survived.
        now = time.time_ns()
        larger = (
            func.greatest if self._db.dialect == "postgresql" else func.max
        )  # SQLite: max(a, b)
        statement = conflict_insert(self._db.dialect, CorpusVersionRow)
        version = session.scalar(
            statement.values(tenant_id=tenant_id, version=now)
            .on_conflict_do_update(
                index_elements=[CorpusVersionRow.tenant_id],
                set_={"version": larger(CorpusVersionRow.version + 1, now)},
            )
            .returning(CorpusVersionRow.version)
        )
        assert version is not None  # the upsert always returns its row
        return int(version)

    def _contains(self, needle: str) -> ColumnElement[bool]:
        # Position functions, not LIKE: SQLite's LIKE ignores ASCII case, and a needle holding
        # `%` or `_` would need escaping.
        position = func.strpos if self._db.dialect == "postgresql" else func.instr
        return position(ChunkRow.text, needle) > 0
