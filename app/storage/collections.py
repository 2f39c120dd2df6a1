"""Collections, groups, memberships and grants of a tenant, and its access version.

Every change here runs in one transaction with its audit entry and a bump of the tenant's access
version, which every process compares on each request (`AccessStore.version`): a grant revoked
in one process is refused by the next request in any other, the way a revoked token is.
`graph` reads everything the access resolver needs in four queries, once per version.
"""

from __future__ import annotations

import functools
import json
import secrets
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, TypeVar

from sqlalchemy import Select, bindparam, delete, func, select, update
from sqlalchemy.engine import Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.domain import GENERAL_COLLECTION
from app.errors import Conflict, NotFound
from app.storage.audit import AuditEntry, write_entry
from app.storage.db import DatabaseStore, affected_rows, conflict_insert, utc_now
from app.storage.documents import StoredUsage
from app.storage.records import count_rows, record_of
from app.storage.tables import (
    AccessVersionRow,
    CollectionGrantRow,
    CollectionRow,
    DocumentRow,
    GroupMemberRow,
    GroupRow,
    UserRow,
    table_of,
)

Visibility = Literal["tenant", "restricted"]
_VERSION_OF_TENANT = select(AccessVersionRow.version).where(
    AccessVersionRow.tenant_id == bindparam("tenant_id")
)
Permission = Literal["read", "write", "manage"]
PrincipalKind = Literal["group", "user"]
PERMISSIONS: tuple[Permission, ...] = ("read", "write", "manage")
# A table whose rows a tenant finds by id or by name.
_Named = TypeVar("_Named", CollectionRow, GroupRow)

COLLECTION_NOT_FOUND = "collection not found"
GROUP_NOT_FOUND = "group not found"


@dataclass(frozen=True)
class CollectionRecord:
    """A collection as the API shows it."""

    tenant_id: str
    collection_id: str
    name: str
    description: str
    visibility: Visibility
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class GroupRecord:
    """A group as the API shows it."""

    tenant_id: str
    group_id: str
    name: str
    description: str
    created_at: datetime


@dataclass(frozen=True)
class GroupMembers:
    """A group and its members' user ids."""

    group: GroupRecord
    members: list[str]


@dataclass(frozen=True)
class Grant:
    """One permission on a collection for a group or a user."""

    principal_kind: PrincipalKind
    principal_id: str
    permission: Permission


@dataclass(frozen=True)
class AccessGraph:
    """Everything that decides a tenant's permissions, at one access version."""

    version: int
    collections: dict[str, CollectionRecord]
    groups_of_user: dict[str, frozenset[str]] = field(default_factory=dict)
    # (principal kind, principal id) -> [(collection id, permission)]
    grants_of: dict[tuple[str, str], list[tuple[str, Permission]]] = field(default_factory=dict)


@dataclass(frozen=True)
class DocumentFacts:
    """What filters read of a document: its built-in fields and its own metadata."""

    document_id: str
    collection_id: str
    source: str
    uploaded_at: datetime
    uploaded_by: str | None
    uploaded_by_name: str | None
    metadata: dict[str, Any]
    language: str | None = None


@dataclass(frozen=True)
class CollectionChange:
    """What to change on a collection; None keeps a field."""

    name: str | None = None
    description: str | None = None
    visibility: Visibility | None = None

    def values(self) -> dict[str, Any]:
        """The fields it changes, by name (those not None)."""
        return {k: v for k, v in vars(self).items() if v is not None}


def new_collection_id() -> str:
    """A fresh collection id (never a valid collection name: names may not look like one)."""
    return "col_" + secrets.token_hex(6)


def new_group_id() -> str:
    """A fresh group id."""
    return "grp_" + secrets.token_hex(6)


def _bump(session: Session, dialect: str, tenant_id: str) -> None:
    session.execute(
        conflict_insert(dialect, AccessVersionRow)
        .values(tenant_id=tenant_id, version=1)
        .on_conflict_do_update(
            index_elements=[AccessVersionRow.tenant_id],
            set_={"version": AccessVersionRow.version + 1},
        )
    )


class AccessStore(DatabaseStore):
    """Tenant-scoped collections, groups and grants; see the module docstring."""

    # --- version and graph ---

    def version(self, tenant_id: str) -> int:
        """The tenant's access version (0 before its first change): read on every request, so
        one Core statement, built once, on a pooled connection, no ORM session."""
        found = self._db.first_row(_VERSION_OF_TENANT, {"tenant_id": tenant_id})
        return 0 if found is None else int(found.version)

    def ensure_general(self, tenant_id: str) -> None:
        """Create the tenant's `general` collection if it has none yet (a new tenant)."""
        now = utc_now()
        with self._db.session() as session:
            session.execute(
                conflict_insert(self._db.dialect, CollectionRow)
                .values(
                    tenant_id=tenant_id,
                    collection_id=GENERAL_COLLECTION,
                    name=GENERAL_COLLECTION,
                    description="",
                    visibility="tenant",
                    created_at=now,
                    updated_at=now,
                )
                .on_conflict_do_nothing()
            )

    def graph(self, tenant_id: str) -> AccessGraph:
        """The tenant's collections, memberships and grants, read in one transaction."""
        with self._db.session() as session:
            found = session.get(AccessVersionRow, tenant_id)
            version = 0 if found is None else int(found.version)
            rows = session.scalars(
                select(CollectionRow).where(CollectionRow.tenant_id == tenant_id)
            )
            collections = {row.collection_id: record_of(CollectionRecord, row) for row in rows}
            members: dict[str, set[str]] = {}
            for group_id, user_id in session.execute(
                select(GroupMemberRow.group_id, GroupMemberRow.user_id).where(
                    GroupMemberRow.tenant_id == tenant_id
                )
            ):
                members.setdefault(user_id, set()).add(group_id)
            grants: dict[tuple[str, str], list[tuple[str, Permission]]] = {}
            for grant in session.scalars(
                select(CollectionGrantRow).where(CollectionGrantRow.tenant_id == tenant_id)
            ):
                key = (grant.principal_kind, grant.principal_id)
                grants.setdefault(key, []).append((grant.collection_id, grant.permission))  # type: ignore[arg-type]
        return AccessGraph(
            version,
            collections,
            {user: frozenset(groups) for user, groups in members.items()},
            grants,
        )

    # --- collections ---

    def create_collection(
        self,
        tenant_id: str,
        name: str,
        description: str,
        visibility: Visibility,
        audit: AuditEntry,
    ) -> CollectionRecord:
        """A new collection; Conflict when the tenant already has one of that name."""
        now = utc_now()
        row = CollectionRow(
            tenant_id=tenant_id,
            collection_id=new_collection_id(),
            name=name,
            description=description,
            visibility=visibility,
            created_at=now,
            updated_at=now,
        )
        try:
            with self._db.session() as session:
                session.add(row)
                session.flush()
                write_entry(session, replace(audit, target_id=row.collection_id))
                _bump(session, self._db.dialect, tenant_id)
                return record_of(CollectionRecord, row)
        except IntegrityError:
            raise Conflict(f"a collection named {name!r} already exists") from None

    def _by_id_or_name(
        self, table: type[_Named], tenant_id: str, id_or_name: str
    ) -> Row[Any] | None:
        """The tenant's row with this id, else with this name (a collection's or a group's), as
        given or NFC (names are stored NFC; one from before that may not be). A read: a plain
        connection, no ORM session to set up."""
        by_id, by_name = _lookups(table)
        keys = [(by_id, id_or_name)]
        keys += [
            (by_name, n)
            for n in dict.fromkeys((id_or_name, unicodedata.normalize("NFC", id_or_name)))
        ]
        with self._db.engine.connect() as connection:
            for statement, key in keys:
                row = connection.execute(statement, {"tenant_id": tenant_id, "key": key}).first()
                if row is not None:
                    return row
        return None

    def find_collection(self, tenant_id: str, id_or_name: str) -> CollectionRecord | None:
        """The collection with this id, else with this name; None when neither exists."""
        row = self._by_id_or_name(CollectionRow, tenant_id, id_or_name)
        return None if row is None else record_of(CollectionRecord, row)

    def update_collection(
        self, tenant_id: str, collection_id: str, change: CollectionChange, audit: AuditEntry
    ) -> CollectionRecord:
        """Apply `change`; NotFound or Conflict (a name taken)."""
        values = change.values()
        try:
            with self._db.session() as session:
                row = session.get(CollectionRow, (tenant_id, collection_id))
                if row is None:
                    raise NotFound(COLLECTION_NOT_FOUND)
                for name, value in values.items():
                    setattr(row, name, value)
                row.updated_at = utc_now()
                session.flush()
                write_entry(session, replace(audit, target_id=collection_id))
                _bump(session, self._db.dialect, tenant_id)
                return record_of(CollectionRecord, row)
        except IntegrityError:
            raise Conflict(f"a collection named {change.name!r} already exists") from None

    def delete_collection(self, tenant_id: str, collection_id: str, audit: AuditEntry) -> bool:
        """Remove an empty collection and its grants; False when it still holds documents."""
        with self._db.session() as session:
            if self._document_count(session, tenant_id, collection_id):
                return False
            removed = affected_rows(
                session,
                delete(CollectionRow).where(
                    CollectionRow.tenant_id == tenant_id,
                    CollectionRow.collection_id == collection_id,
                ),
            )
            if not removed:
                raise NotFound(COLLECTION_NOT_FOUND)
            session.execute(
                delete(CollectionGrantRow).where(
                    CollectionGrantRow.tenant_id == tenant_id,
                    CollectionGrantRow.collection_id == collection_id,
                )
            )
            write_entry(session, replace(audit, target_id=collection_id))
            _bump(session, self._db.dialect, tenant_id)
            return True

    @staticmethod
    def _document_count(session: Session, tenant_id: str, collection_id: str) -> int:
        return count_rows(
            session,
            DocumentRow,
            DocumentRow.tenant_id == tenant_id,
            DocumentRow.collection_id == collection_id,
        )

    def counts(self, tenant_id: str) -> dict[str, tuple[int, int]]:
        """(documents, chunks) of each collection that holds any."""
        with self._db.session() as session:
            rows = session.execute(
                select(
                    DocumentRow.collection_id,
                    func.count(),
                    func.coalesce(func.sum(DocumentRow.chunks), 0),
                )
                .where(DocumentRow.tenant_id == tenant_id)
                .group_by(DocumentRow.collection_id)
            )
            return {cid: (int(docs), int(chunks)) for cid, docs, chunks in rows}

    def usage_in(self, tenant_id: str, collections: Iterable[str]) -> StoredUsage:
        """Documents, stored bytes, chunks and OCR pages of these collections together."""
        with self._db.session() as session:
            row = session.execute(
                select(
                    func.count(),
                    func.coalesce(func.sum(DocumentRow.size_bytes), 0),
                    func.coalesce(func.sum(DocumentRow.chunks), 0),
                    func.coalesce(func.sum(DocumentRow.ocr_pages), 0),
                ).where(
                    DocumentRow.tenant_id == tenant_id,
                    DocumentRow.collection_id.in_(sorted(collections)),
                )
            ).one()
            documents, stored_bytes, chunks, ocr_pages = row
            return StoredUsage(int(documents), int(stored_bytes), int(chunks), int(ocr_pages))

    def document_ids(self, tenant_id: str, collection_id: str) -> list[str]:
        """The ids of the collection's documents."""
        with self._db.session() as session:
            return list(
                session.scalars(
                    select(DocumentRow.document_id).where(
                        DocumentRow.tenant_id == tenant_id,
                        DocumentRow.collection_id == collection_id,
                    )
                )
            )

    def catalog(self, tenant_id: str) -> list[DocumentFacts]:
        """What filters and scopes read of each of the tenant's documents."""
        with self._db.session() as session:
            rows = session.execute(
                select(
                    DocumentRow.document_id,
                    DocumentRow.collection_id,
                    DocumentRow.source,
                    DocumentRow.uploaded_at,
                    DocumentRow.uploaded_by,
                    UserRow.username,
                    DocumentRow.metadata_json,
                    DocumentRow.language,
                )
                .outerjoin(UserRow, UserRow.id == DocumentRow.uploaded_by)
                .where(DocumentRow.tenant_id == tenant_id)
            )
            return [
                DocumentFacts(doc, collection, source, at, by, name, _metadata(stored), language)
                for doc, collection, source, at, by, name, stored, language in rows
            ]

    def collection_of(self, tenant_id: str, document_id: str) -> str | None:
        """The collection of a document (None: no such document)."""
        with self._db.session() as session:
            found: str | None = session.scalar(
                select(DocumentRow.collection_id).where(
                    DocumentRow.tenant_id == tenant_id, DocumentRow.document_id == document_id
                )
            )
            return found

    def document_metadata(self, tenant_id: str, document_id: str) -> dict[str, Any] | None:
        """A document's own metadata (None: no such document)."""
        with self._db.session() as session:
            stored = session.scalar(
                select(DocumentRow.metadata_json).where(
                    DocumentRow.tenant_id == tenant_id, DocumentRow.document_id == document_id
                )
            )
            return None if stored is None else _metadata(stored)

    def set_document(
        self,
        tenant_id: str,
        document_id: str,
        audit: AuditEntry | None,
        collection_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Move a document to another collection and/or replace its metadata (its vectors and
        chunks stay as they are). Conflict when the collection it moves to already holds a
        document of its name (a name is unique within a collection)."""
        values: dict[str, Any] = {}
        if collection_id is not None:
            values["collection_id"] = collection_id
        if metadata is not None:
            values["metadata_json"] = json.dumps(dict(metadata), sort_keys=True)
        try:
            with self._db.session() as session:
                changed = affected_rows(
                    session,
                    update(DocumentRow)
                    .where(
                        DocumentRow.tenant_id == tenant_id, DocumentRow.document_id == document_id
                    )
                    .values(**values),
                )
                if not changed:
                    raise NotFound("document not found")
                if audit is not None:
                    write_entry(session, audit)
        except IntegrityError:
            raise Conflict(
                "the collection already holds a document of this name: rename or delete one first"
            ) from None

    # --- grants ---

    def grants(self, tenant_id: str, collection_id: str) -> list[Grant]:
        """The collection's grants, groups first, then users."""
        with self._db.session() as session:
            rows = session.scalars(
                select(CollectionGrantRow)
                .where(
                    CollectionGrantRow.tenant_id == tenant_id,
                    CollectionGrantRow.collection_id == collection_id,
                )
                .order_by(CollectionGrantRow.principal_kind, CollectionGrantRow.principal_id)
            )
            return [Grant(r.principal_kind, r.principal_id, r.permission) for r in rows]  # type: ignore[arg-type]

    def replace_grants(
        self, tenant_id: str, collection_id: str, grants: Sequence[Grant], audit: AuditEntry
    ) -> None:
        """Make `grants` the collection's only grants (NotFound for an unknown group or user)."""
        with self._db.session() as session:
            if session.get(CollectionRow, (tenant_id, collection_id)) is None:
                raise NotFound(COLLECTION_NOT_FOUND)
            self._check_principals(session, tenant_id, grants)
            session.execute(
                delete(CollectionGrantRow).where(
                    CollectionGrantRow.tenant_id == tenant_id,
                    CollectionGrantRow.collection_id == collection_id,
                )
            )
            session.add_all(
                CollectionGrantRow(
                    tenant_id=tenant_id,
                    collection_id=collection_id,
                    principal_kind=grant.principal_kind,
                    principal_id=grant.principal_id,
                    permission=grant.permission,
                )
                for grant in grants
            )
            write_entry(session, replace(audit, target_id=collection_id))
            _bump(session, self._db.dialect, tenant_id)

    @staticmethod
    def _check_principals(session: Session, tenant_id: str, grants: Iterable[Grant]) -> None:
        groups = {g.principal_id for g in grants if g.principal_kind == "group"}
        users = {g.principal_id for g in grants if g.principal_kind == "user"}
        known_groups = set(
            session.scalars(
                select(GroupRow.group_id).where(
                    GroupRow.tenant_id == tenant_id, GroupRow.group_id.in_(groups)
                )
            )
        )
        known_users = set(
            session.scalars(
                select(UserRow.id).where(UserRow.tenant_id == tenant_id, UserRow.id.in_(users))
            )
        )
        if groups - known_groups:
            raise NotFound(f"group not found: {sorted(groups - known_groups)[0]}")
        if users - known_users:
            raise NotFound(f"user not found: {sorted(users - known_users)[0]}")

    # --- groups ---

    def create_group(
        self, tenant_id: str, name: str, description: str, audit: AuditEntry
    ) -> GroupRecord:
        """A new group; Conflict when the tenant has one of that name."""
        row = GroupRow(
            tenant_id=tenant_id,
            group_id=new_group_id(),
            name=name,
            description=description,
            created_at=utc_now(),
        )
        try:
            with self._db.session() as session:
                session.add(row)
                session.flush()
                write_entry(session, replace(audit, target_id=row.group_id))
                return record_of(GroupRecord, row)
        except IntegrityError:
            raise Conflict(f"a group named {name!r} already exists") from None

    def groups(self, tenant_id: str) -> list[GroupMembers]:
        """Every group of the tenant by name, with its members' user ids."""
        with self._db.session() as session:
            rows = session.scalars(
                select(GroupRow).where(GroupRow.tenant_id == tenant_id).order_by(GroupRow.name)
            ).all()
            members: dict[str, list[str]] = {}
            for group_id, user_id in session.execute(
                select(GroupMemberRow.group_id, GroupMemberRow.user_id)
                .where(GroupMemberRow.tenant_id == tenant_id)
                .order_by(GroupMemberRow.user_id)
            ):
                members.setdefault(group_id, []).append(user_id)
            return [
                GroupMembers(record_of(GroupRecord, r), members.get(r.group_id, [])) for r in rows
            ]

    def find_group(self, tenant_id: str, id_or_name: str) -> GroupRecord | None:
        """The group with this id, else with this name."""
        row = self._by_id_or_name(GroupRow, tenant_id, id_or_name)
        return None if row is None else record_of(GroupRecord, row)

    def update_group(
        self,
        tenant_id: str,
        group_id: str,
        name: str | None,
        description: str | None,
        audit: AuditEntry,
    ) -> GroupRecord:
        """Rename or re-describe a group."""
        try:
            with self._db.session() as session:
                row = session.get(GroupRow, (tenant_id, group_id))
                if row is None:
                    raise NotFound(GROUP_NOT_FOUND)
                if name is not None:
                    row.name = name
                if description is not None:
                    row.description = description
                session.flush()
                write_entry(session, replace(audit, target_id=group_id))
                return record_of(GroupRecord, row)
        except IntegrityError:
            raise Conflict(f"a group named {name!r} already exists") from None

    def delete_group(self, tenant_id: str, group_id: str, audit: AuditEntry) -> None:
        """Remove a group, its memberships and its grants."""
        with self._db.session() as session:
            removed = affected_rows(
                session,
                delete(GroupRow).where(
                    GroupRow.tenant_id == tenant_id, GroupRow.group_id == group_id
                ),
            )
            if not removed:
                raise NotFound(GROUP_NOT_FOUND)
            session.execute(
                delete(GroupMemberRow).where(
                    GroupMemberRow.tenant_id == tenant_id, GroupMemberRow.group_id == group_id
                )
            )
            session.execute(
                delete(CollectionGrantRow).where(
                    CollectionGrantRow.tenant_id == tenant_id,
                    CollectionGrantRow.principal_kind == "group",
                    CollectionGrantRow.principal_id == group_id,
                )
            )
            write_entry(session, replace(audit, target_id=group_id))
            _bump(session, self._db.dialect, tenant_id)

    def set_member(
        self, tenant_id: str, group_id: str, user_id: str, member: bool, audit: AuditEntry
    ) -> bool:
        """Add (`member`) or remove a user; False when nothing changed."""
        with self._db.session() as session:
            if session.get(GroupRow, (tenant_id, group_id)) is None:
                raise NotFound(GROUP_NOT_FOUND)
            user = session.get(UserRow, user_id)
            if user is None or user.tenant_id != tenant_id:
                raise NotFound("user not found")
            present = session.get(GroupMemberRow, (tenant_id, group_id, user_id)) is not None
            if present == member:
                return False
            if member:
                session.add(GroupMemberRow(tenant_id=tenant_id, group_id=group_id, user_id=user_id))
            else:
                session.execute(
                    delete(GroupMemberRow).where(
                        GroupMemberRow.tenant_id == tenant_id,
                        GroupMemberRow.group_id == group_id,
                        GroupMemberRow.user_id == user_id,
                    )
                )
            write_entry(session, audit)
            _bump(session, self._db.dialect, tenant_id)
            return True


@functools.cache
def _lookups(table: type[_Named]) -> tuple[Select[Any], Select[Any]]:
    """The statements that find a tenant's row of `table` (collections or groups) by id and by
    name, built once: every upload looks its collection up."""
    columns = table_of(table).columns
    key = next(c for c in table_of(table).primary_key.columns if c.name != "tenant_id")
    of_tenant = columns.tenant_id == bindparam("tenant_id")
    by_id = select(*columns).where(of_tenant, key == bindparam("key"))
    return by_id, select(*columns).where(of_tenant, columns.name == bindparam("key")).limit(1)


def _metadata(stored: str | None) -> dict[str, Any]:
    try:
        value = json.loads(stored or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
