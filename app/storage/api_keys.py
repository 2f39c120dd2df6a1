"""API keys: stored as their keyed hash (HMAC-SHA256, computed by the service) and a short
display prefix; the key itself is never written anywhere.

A key made by another key (`parent_key_id`) goes when its parent goes: revoking a key revokes
every key made from it, in the same transaction. Adding and revoking run in one `write_session`
per tenant, so a user's cap of active keys holds under concurrent creates and a key cannot be
made from a parent that is being revoked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

from sqlalchemy import bindparam, delete, or_, select, update
from sqlalchemy.orm import Session

from app.domain import KEY_SCOPES, KeyScope, Role
from app.errors import AuthenticationFailed, QuotaExceeded
from app.storage.audit import AuditEntry, write_entry
from app.storage.db import DatabaseStore, utc_now
from app.storage.records import columns_of, count_rows, record_of
from app.storage.tables import ApiKeyRow, UserRow
from app.storage.users import UserRecord, access_version_of_user

# last_used_at is written at most this often per key: a busy script costs one write a minute,
# not one per request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class ApiKeyRecord:
    """A key's metadata (its hash stays in the database layer's hands only for lookups)."""

    key_id: str
    tenant_id: str
    user_id: str
    name: str
    role: Role
    prefix: str
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    scopes: tuple[KeyScope, ...] = ()  # what a key may do beyond its role (keys:manage)
    parent_key_id: str | None = None  # the key that made this one (None: a signed-in person)
    # The collection ids the key is limited to; None: every collection its owner may read.
    collections: tuple[str, ...] | None = None


@dataclass(frozen=True)
class KeyWithOwner:
    """What a request with a key checks, read in one query: the key, its user, and their
    tenant's access version."""

    key: ApiKeyRecord
    owner: UserRecord
    access_version: int


def _record(row: ApiKeyRow | SimpleNamespace) -> ApiKeyRecord:
    stored = row.scopes.split()
    limited = None if row.collections is None else tuple(json.loads(row.collections))
    return record_of(
        ApiKeyRecord,
        row,
        scopes=tuple(s for s in KEY_SCOPES if s in stored),
        collections=limited,
    )


def _key_check() -> Any:
    """The key check's query: the key by `:key_hash` (its columns labelled `key_*`), its owner
    (`owner_*`) and their tenant's access version."""
    keys, owners = ApiKeyRow.__table__, UserRow.__table__
    return (
        select(
            *(column.label(f"key_{column.name}") for column in keys.columns),
            *(column.label(f"owner_{column.name}") for column in owners.columns),
            access_version_of_user().label("access_version"),
        )
        .join_from(keys, owners, owners.c.id == keys.c.user_id)
        .where(keys.c.key_hash == bindparam("key_hash"))
    )


# Built once, like the token check (app/storage/users.py): each request skips rebuilding it.
_KEY_CHECK = _key_check()


def _columns(found: Any, prefix: str) -> SimpleNamespace:
    """One table's columns of a `_KEY_CHECK` row, by their own names."""
    return SimpleNamespace(
        **{
            name.removeprefix(prefix): value
            for name, value in found._mapping.items()
            if name.startswith(prefix)
        }
    )


def _keys_lock(tenant_id: str) -> str:
    return f"api-keys:{tenant_id}"


def _active_keys(session: Session, user_id: str, now: datetime) -> int:
    """The user's keys that still work (revoked keys are deleted; expired ones linger)."""
    return count_rows(
        session,
        ApiKeyRow,
        ApiKeyRow.user_id == user_id,
        or_(ApiKeyRow.expires_at.is_(None), ApiKeyRow.expires_at > now),
    )


def _with_descendants(session: Session, key_id: str) -> list[str]:
    """The key and every key made from it, however deep."""
    found, frontier = [key_id], [key_id]
    while frontier:
        frontier = list(
            session.scalars(select(ApiKeyRow.key_id).where(ApiKeyRow.parent_key_id.in_(frontier)))
        )
        found.extend(frontier)
    return found


class ApiKeyStore(DatabaseStore):
    """Keys per user of a tenant; another tenant's key behaves like a missing one."""

    def add(
        self,
        record: ApiKeyRecord,
        key_hash: str,
        audit: AuditEntry,
        max_active_per_user: int | None = None,
    ) -> ApiKeyRecord:
        """Store a new key's metadata and hash with its audit entry; QuotaExceeded when its
        user already has `max_active_per_user` working keys, AuthenticationFailed when the key
        making it was revoked meanwhile (as that key itself now gets)."""
        row = ApiKeyRow(
            **columns_of(
                record,
                key_hash=key_hash,
                last_used_at=None,
                scopes=" ".join(record.scopes),
                collections=None if record.collections is None else json.dumps(record.collections),
            )
        )
        with self._db.write_session(_keys_lock(record.tenant_id)) as session:
            limit = max_active_per_user
            if (
                limit is not None
                and _active_keys(session, record.user_id, record.created_at) >= limit
            ):
                raise QuotaExceeded(
                    "api_keys",
                    f"quota exceeded: API keys (limit {limit} working keys per user); revoke "
                    "keys you no longer use before making new ones",
                )
            if (
                record.parent_key_id is not None
                and session.get(ApiKeyRow, record.parent_key_id) is None
            ):
                raise AuthenticationFailed("invalid, expired or revoked API key")
            session.add(row)
            write_entry(session, audit)
        return _record(row)

    def find(self, key_hash: str) -> ApiKeyRecord | None:
        """The key with this hash, or None."""
        with self._db.session() as session:
            row = session.scalars(select(ApiKeyRow).where(ApiKeyRow.key_hash == key_hash)).first()
            return _record(row) if row else None

    def find_with_owner(self, key_hash: str) -> KeyWithOwner | None:
        """The key with this hash, its user and their tenant's access version, in one query
        (what every request with a key checks), or None: a statement built once, read on a
        plain connection, as the token check is."""
        found = self._db.first_row(_KEY_CHECK, {"key_hash": key_hash})
        if found is None:
            return None
        return KeyWithOwner(
            key=_record(_columns(found, "key_")),
            owner=record_of(UserRecord, _columns(found, "owner_")),
            access_version=int(found.access_version),
        )

    def list(self, tenant_id: str, user_id: str | None) -> list[ApiKeyRecord]:
        """The tenant's keys (of one user, or of everyone with None), newest first."""
        query = select(ApiKeyRow).where(ApiKeyRow.tenant_id == tenant_id)
        if user_id is not None:
            query = query.where(ApiKeyRow.user_id == user_id)
        query = query.order_by(ApiKeyRow.created_at.desc(), ApiKeyRow.key_id)
        with self._db.session() as session:
            return [_record(row) for row in session.scalars(query)]

    def remove(
        self, tenant_id: str, key_id: str, user_id: str | None, audit: AuditEntry
    ) -> ApiKeyRecord | None:
        """Delete the tenant's key (only if `user_id`'s, unless None), every key made from it,
        and its audit entry; the removed key, or None when there was no such key."""
        query = select(ApiKeyRow).where(
            ApiKeyRow.tenant_id == tenant_id, ApiKeyRow.key_id == key_id
        )
        if user_id is not None:
            query = query.where(ApiKeyRow.user_id == user_id)
        with self._db.write_session(_keys_lock(tenant_id)) as session:
            row = session.scalars(query).first()
            if row is None:
                return None
            record = _record(row)
            removed = _with_descendants(session, key_id)
            session.execute(delete(ApiKeyRow).where(ApiKeyRow.key_id.in_(removed)))
            detail: dict[str, object] = {**audit.detail, "name": row.name, "prefix": row.prefix}
            if len(removed) > 1:
                detail["made_from_it"] = removed[1:]
            write_entry(session, replace(audit, detail=detail))
            return record

    def touch(self, record: ApiKeyRecord, now: datetime | None = None) -> None:
        """Note the key was used now, unless that was already noted within the resolution."""
        moment = now or utc_now()
        stale = moment - LAST_USED_RESOLUTION
        if record.last_used_at is not None and record.last_used_at > stale:
            return  # nothing to write: the common case of a busy key
        with self._db.session() as session:
            session.execute(
                update(ApiKeyRow)
                .where(
                    ApiKeyRow.key_id == record.key_id,
                    or_(ApiKeyRow.last_used_at.is_(None), ApiKeyRow.last_used_at <= stale),
                )
                .values(last_used_at=moment)
            )
