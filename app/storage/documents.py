"""The documents table the API lists: one row per (tenant, document), replaced on re-upload.

Every method takes the tenant; a document of another tenant behaves exactly like a missing one.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any, Literal

from sqlalchemy import ColumnElement, Select, bindparam, case, delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.domain import ListedPage
from app.domain import document_id as new_document_id
from app.errors import DocumentNameTaken
from app.storage.audit import AuditEntry, write_entry
from app.storage.db import DatabaseStore, affected_rows, conflict_insert, utc_now
from app.storage.records import count_rows, listed_page, record_of
from app.storage.tables import DocumentRow, UserRow, table_of

DocumentStatus = Literal["queued", "processing", "done", "failed"]


@dataclass(frozen=True)
class DocumentRecord:
    """A document as the API shows it (detached from any session)."""

    document_id: str
    tenant_id: str
    source: str
    status: DocumentStatus
    pages: int
    chunks: int
    size_bytes: int
    content_sha256: str
    uploaded_at: datetime
    updated_at: datetime
    uploaded_by: str | None = None  # user id; None before roles existed, or from the CLI
    uploaded_by_name: str | None = None  # that user's name, None once the user is deleted
    ocr_pages: int = 0  # pages of the indexed version that OCR was run on (the OCR quota's unit)
    sync_root: str | None = None  # the folder label of the `rag sync` that uploaded it
    collection_id: str = "general"  # the collection it belongs to
    metadata_json: str = "{}"  # its own metadata fields, as JSON
    language: str | None = None  # detected in its indexed text (None: not told)

    @property
    def metadata(self) -> dict[str, Any]:
        """Its own metadata fields (parsed from `metadata_json`)."""
        parsed: dict[str, Any] = json.loads(self.metadata_json or "{}")
        return parsed


def _record(row: DocumentRow, uploader_name: str | None = None) -> DocumentRecord:
    return record_of(DocumentRecord, row, uploaded_by_name=uploader_name)


def _with_uploader() -> Select[DocumentRow, str]:
    """Documents with the name of their uploader (None when the uploader is unknown or
    deleted: an outer join, so the name is typed `str` but may be None)."""
    return select(DocumentRow, UserRow.username).outerjoin(
        UserRow, UserRow.id == DocumentRow.uploaded_by
    )


def _document_where(*keys: str) -> Any:
    """A document with the name of its uploader (as `_with_uploader`), by the values of `keys`
    (columns of the documents table, bound by name): built once, so a read skips rebuilding
    the statement and its cache key."""
    documents = table_of(DocumentRow).columns
    return (
        select(*documents, table_of(UserRow).c.username.label("uploaded_by_name"))
        .outerjoin(UserRow, UserRow.id == DocumentRow.uploaded_by)
        .where(*(documents[key] == bindparam(key) for key in keys))
    )


_DOCUMENT_BY_ID = _document_where("tenant_id", "document_id")
_DOCUMENT_BY_NAME = _document_where("tenant_id", "collection_id", "source")
# What `identify` reads (every upload of a new name): the id of the name's document, and where
# the document holding a candidate id is.
_ID_OF_NAME = select(DocumentRow.document_id).where(
    DocumentRow.tenant_id == bindparam("tenant_id"),
    DocumentRow.collection_id == bindparam("collection_id"),
    DocumentRow.source == bindparam("source"),
)
_HOLDER_OF_ID = select(DocumentRow.collection_id, DocumentRow.source).where(
    DocumentRow.tenant_id == bindparam("tenant_id"),
    DocumentRow.document_id == bindparam("document_id"),
)


def _in_collections(collections: Collection[str] | None) -> list[Any]:
    """The condition of a listing limited to some collections (none: no condition)."""
    return [] if collections is None else [DocumentRow.collection_id.in_(sorted(collections))]


@dataclass(frozen=True)
class IndexedFacts:
    """What `DocumentStore.record_indexed` writes for a document just indexed."""

    document_id: str
    source: str
    size_bytes: int
    content_sha256: str
    pages: int
    chunks: int
    ocr_pages: int
    language: str | None = None


def _new_row(
    tenant_id: str,
    document_id: str,
    source: str,
    size_bytes: int,
    content_sha256: str,
    status: DocumentStatus,
    now: datetime,
) -> dict[str, Any]:
    """Column values of a freshly uploaded document: nothing indexed yet."""
    return {
        "tenant_id": tenant_id,
        "document_id": document_id,
        "source": source,
        "status": status,
        "pages": 0,
        "chunks": 0,
        "size_bytes": size_bytes,
        "content_sha256": content_sha256,
        "uploaded_at": now,
        "updated_at": now,
    }


# What a new upload of a document replaces in its existing row; and its indexing, besides.
_UPLOAD_FACTS = ("source", "status", "size_bytes", "content_sha256", "uploaded_at", "updated_at")
_INDEXED_FACTS = (*_UPLOAD_FACTS, "pages", "chunks", "ocr_pages", "language")


class DocumentStore(DatabaseStore):
    """Tenant-scoped document metadata in the service database."""

    def upsert(
        self,
        tenant_id: str,
        document_id: str,
        source: str,
        size_bytes: int,
        content_sha256: str,
        status: DocumentStatus = "queued",
    ) -> DocumentRecord:
        """Record an upload; re-uploading the same name replaces the row (one row per document).

        `pages` and `chunks` keep describing what is indexed now until the new job finishes.
        """
        now = utc_now()
        values = _new_row(tenant_id, document_id, source, size_bytes, content_sha256, status, now)
        with self._db.session() as session:
            session.execute(self._upload_upsert, values)
            row = session.get(DocumentRow, (tenant_id, document_id), populate_existing=True)
            assert row is not None  # just written in this transaction
            return _record(row)

    def record_indexed(
        self, tenant_id: str, indexed: Sequence[IndexedFacts], *, must_exist: bool
    ) -> set[str]:
        """Record documents just indexed (each upload's facts, status done, pages, chunks and
        OCR pages) in one transaction. With `must_exist`, documents deleted meanwhile stay
        deleted; their ids are returned."""
        ids = [facts.document_id for facts in indexed]
        with self._db.session() as session:
            gone: set[str] = set()
            if must_exist:
                present = session.scalars(
                    select(DocumentRow.document_id).where(
                        DocumentRow.tenant_id == tenant_id, DocumentRow.document_id.in_(ids)
                    )
                )
                gone = set(ids) - set(present)
            now = utc_now()
            rows = [
                {
                    **_new_row(
                        tenant_id,
                        facts.document_id,
                        facts.source,
                        facts.size_bytes,
                        facts.content_sha256,
                        "done",
                        now,
                    ),
                    "pages": facts.pages,
                    "chunks": facts.chunks,
                    "ocr_pages": facts.ocr_pages,
                    "language": facts.language,
                }
                for facts in indexed
                if facts.document_id not in gone
            ]
            if rows:  # one statement for the batch (executemany), not two per document
                session.execute(self._indexed_upsert, rows)
        return gone

    @cached_property
    def _upload_upsert(self) -> Any:
        """The upsert of `upsert`, built once (every upload runs it)."""
        return self._upsert(_UPLOAD_FACTS)

    @cached_property
    def _indexed_upsert(self) -> Any:
        """The upsert of `record_indexed`, built once (every ingest batch runs it)."""
        return self._upsert(_INDEXED_FACTS)

    def _upsert(self, replaced: Sequence[str]) -> Any:
        """INSERT a document row (its values as parameters: one row, or many executed at once),
        or on a re-upload replace the `replaced` columns of the existing one."""
        insert = conflict_insert(self._db.dialect, table_of(DocumentRow))
        return insert.on_conflict_do_update(
            index_elements=[DocumentRow.tenant_id, DocumentRow.document_id],
            set_={name: insert.excluded[name] for name in replaced},
        )

    def set_status(self, tenant_id: str, document_id: str, status: DocumentStatus) -> bool:
        """Update a document's state; False when it no longer exists (deleted meanwhile)."""
        statement = (
            update(DocumentRow)
            .where(DocumentRow.tenant_id == tenant_id, DocumentRow.document_id == document_id)
            .values(status=status, updated_at=utc_now())
        )
        with self._db.session() as session:
            return bool(affected_rows(session, statement))

    def get(self, tenant_id: str, document_id: str) -> DocumentRecord | None:
        """The tenant's document, or None when missing or another tenant's."""
        return self._first(_DOCUMENT_BY_ID, tenant_id=tenant_id, document_id=document_id)

    def find(self, tenant_id: str, collection_id: str, source: str) -> DocumentRecord | None:
        """The document of this name in a collection, or None."""
        return self._first(
            _DOCUMENT_BY_NAME, tenant_id=tenant_id, collection_id=collection_id, source=source
        )

    def _first(self, statement: Any, **values: str) -> DocumentRecord | None:
        found = self._db.first_row(statement, values)
        return record_of(DocumentRecord, found) if found else None

    def named(self, tenant_id: str, source: str) -> list[DocumentRecord]:
        """The tenant's documents of this name, one per collection that holds it."""
        query = (
            _with_uploader()
            .where(DocumentRow.tenant_id == tenant_id, DocumentRow.source == source)
            .order_by(DocumentRow.collection_id)
        )
        with self._db.session() as session:
            return [_record(row, name) for row, name in session.execute(query)]

    def identify(self, tenant_id: str, collection_id: str, source: str) -> str:
        """The id of the document named `source` in a collection: the existing one's, else the
        one a new document gets (`app.domain.document_id`; a variant of it when a document
        moved away from this collection still holds that id).

        A candidate id held by a document of this very name and collection is that document's:
        an upload racing this one created the name between the two reads, and this one becomes
        its next version instead of a second document under a variant id."""
        name = {"tenant_id": tenant_id, "collection_id": collection_id, "source": source}
        with self._db.engine.connect() as connection:  # reads: no ORM session to set up
            existing = connection.execute(_ID_OF_NAME, name).scalar()
            if existing is not None:
                return str(existing)
            key, attempt = source, 0
            while True:
                candidate = new_document_id(tenant_id, key, collection_id)
                holder = connection.execute(
                    _HOLDER_OF_ID, {"tenant_id": tenant_id, "document_id": candidate}
                ).first()
                if holder is None or tuple(holder) == (collection_id, source):
                    return candidate
                attempt += 1
                key = f"{source}\x00{attempt}"

    def list(
        self,
        tenant_id: str,
        limit: int,
        offset: int = 0,
        collections: Collection[str] | None = None,
    ) -> list[DocumentRecord]:
        """One page of the tenant's documents (of these collections only, when given), most
        recently uploaded first."""
        if limit < 0 or offset < 0:
            raise ValueError("limit and offset must not be negative")
        query = (
            _with_uploader()
            .where(DocumentRow.tenant_id == tenant_id, *_in_collections(collections))
            .order_by(DocumentRow.uploaded_at.desc(), DocumentRow.document_id)
            .limit(limit)
            .offset(offset)
        )
        with self._db.session() as session:
            return [_record(row, name) for row, name in session.execute(query)]

    def count(self, tenant_id: str, collections: Collection[str] | None = None) -> int:
        """How many documents the tenant has (of these collections only, when given)."""
        with self._db.session() as session:
            return count_rows(
                session,
                DocumentRow,
                DocumentRow.tenant_id == tenant_id,
                *_in_collections(collections),
            )

    def usage(self, tenant_id: str) -> StoredUsage:
        """The tenant's document, byte and chunk totals (quotas and `/stats`)."""
        # Read by every batch of jobs: a plain connection and a statement built once.
        with self._db.engine.connect() as connection:
            totals = connection.execute(_USAGE_OF_TENANT, {"usage_tenant": tenant_id}).one()
        return StoredUsage(*(int(total) for total in totals))

    def delete(self, tenant_id: str, document_id: str, audit: AuditEntry | None = None) -> bool:
        """Remove the tenant's document row (with the audit entry, when it existed); returns
        whether it existed."""
        with self._db.session() as session:
            statement = delete(DocumentRow).where(
                DocumentRow.tenant_id == tenant_id, DocumentRow.document_id == document_id
            )
            existed = bool(affected_rows(session, statement))
            if existed and audit is not None:
                write_entry(session, audit)
            return existed

    def set_sync_root(self, tenant_id: str, document_id: str, sync_root: str | None) -> None:
        """Label the tenant's document with the sync folder it came from (None: none)."""
        with self._db.session() as session:
            session.execute(
                update(DocumentRow)
                .where(DocumentRow.tenant_id == tenant_id, DocumentRow.document_id == document_id)
                .values(sync_root=sync_root)
            )

    def page_matching(
        self,
        tenant_id: str,
        wanted: DocumentFilter,
        limit: int,
        offset: int = 0,
        collections: Collection[str] | None = None,
    ) -> ListedPage[DocumentRecord]:
        """One page of the tenant's documents that `wanted` keeps (of these collections only,
        when given), in a stable order (by source), and how many it keeps in all."""
        if limit < 0 or offset < 0:
            raise ValueError("limit and offset must not be negative")
        conditions = [
            DocumentRow.tenant_id == tenant_id,
            *wanted.conditions(),
            *_in_collections(collections),
        ]
        query = _with_uploader().order_by(DocumentRow.source, DocumentRow.document_id)
        with self._db.session() as session:
            return listed_page(session, query, conditions, DocumentRow, limit, offset, _record)


@dataclass(frozen=True)
class DocumentFilter:
    """Which documents a listing keeps: a source prefix, a sync folder label, a collection (by
    id; each optional)."""

    source_prefix: str | None = None
    sync_root: str | None = None
    collection_id: str | None = None

    def conditions(self) -> list[Any]:
        """The SQL conditions of this filter (none: every document)."""
        found: list[Any] = []
        if self.source_prefix:
            # The name's first characters compared as they are: a name is case-sensitive, and
            # SQLite's LIKE (unlike PostgreSQL's) is not, so `docs/` used to list `Docs/` too.
            prefix = self.source_prefix
            found.append(func.substr(DocumentRow.source, 1, len(prefix)) == prefix)
        if self.sync_root is not None:
            found.append(DocumentRow.sync_root == self.sync_root)
        if self.collection_id is not None:
            found.append(DocumentRow.collection_id == self.collection_id)
        return found


@dataclass(frozen=True)
class StoredUsage:
    """What a tenant's documents hold: documents, uploaded bytes, indexed chunks, OCR'd pages."""

    documents: int
    stored_bytes: int
    chunks: int
    ocr_pages: int = 0


def usage_beside(
    session: Session, tenant_id: str, document_id: str
) -> tuple[StoredUsage, StoredUsage]:
    """The tenant's totals in `session` without `document_id`, and that document's own
    (nothing, or its one row), in one pass over the tenant's documents."""
    found = session.execute(_USAGE_BESIDE, {"usage_tenant": tenant_id, "usage_beside": document_id})
    totals = [int(total) for total in found.one()]
    return StoredUsage(*totals[:4]), StoredUsage(*totals[4:])


def _totals(kept: ColumnElement[bool] | None = None) -> list[ColumnElement[int]]:
    """Count, bytes, chunks and OCR pages of the documents selected, of those `kept` if given."""
    if kept is None:
        return [
            func.count(),
            *(func.coalesce(func.sum(column), 0) for column in _USAGE_COLUMNS),
        ]
    return [
        func.count(case((kept, 1))),
        *(func.coalesce(func.sum(case((kept, column), else_=0)), 0) for column in _USAGE_COLUMNS),
    ]


_USAGE_COLUMNS = (DocumentRow.size_bytes, DocumentRow.chunks, DocumentRow.ocr_pages)
_OF_TENANT = DocumentRow.tenant_id == bindparam("usage_tenant")
_USAGE_OF_TENANT = select(*_totals()).where(_OF_TENANT)
# `usage_beside`'s query, built once (each upload runs it inside its write transaction).
_BESIDE = DocumentRow.document_id == bindparam("usage_beside")
_USAGE_BESIDE = select(*_totals(~_BESIDE), *_totals(_BESIDE)).where(_OF_TENANT)


def insert_missing_document(
    session: Session,
    tenant_id: str,
    document_id: str,
    source: str,
    size_bytes: int,
    content_sha256: str,
    uploaded_by: str | None = None,
    placement: Mapping[str, str] | None = None,
) -> None:
    """Add a queued document row in `session`'s transaction unless the tenant already has one.

    An existing row keeps its pages and chunks (they still describe what is indexed) and only
    takes the new uploader and `placement` (`collection_id`, `metadata_json`, when given); the
    job store calls this so a job and the row its worker needs are committed together.

    DocumentNameTaken (the transaction is then lost) when another document of the collection has
    this name: an upload that raced this one to create it committed first, under its own id.
    """
    values = _new_row(
        tenant_id, document_id, source, size_bytes, content_sha256, "queued", utc_now()
    )
    placed = dict(placement or {})
    insert = conflict_insert(session.get_bind().dialect.name, DocumentRow).values(
        **values, uploaded_by=uploaded_by, **placed
    )
    keys = [DocumentRow.tenant_id, DocumentRow.document_id]
    if uploaded_by is None and not placed:  # the CLI: whoever uploaded the current version stays
        statement = insert.on_conflict_do_nothing(index_elements=keys)
    else:
        changed = {**({"uploaded_by": uploaded_by} if uploaded_by else {}), **placed}
        statement = insert.on_conflict_do_update(index_elements=keys, set_=changed)
    try:
        session.execute(statement)
    except IntegrityError as exc:  # the other unique key: (tenant, collection, name)
        raise DocumentNameTaken(
            f"another upload of {source!r} was queued at the same moment; send it again"
        ) from exc
