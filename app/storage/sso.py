"""The single sign-on tables: each tenant's provider, the provider subjects of its users,
sign-ins in flight and one-time exchange codes.

States and exchange codes are stored by their SHA-256, so the table alone cannot complete a
sign-in, and each is taken with one DELETE: of two requests that present the same one, only the
one whose DELETE removed the row goes on (a replay finds nothing), on SQLite and PostgreSQL
alike. Expired rows are deleted as new ones are written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import delete, inspect, select
from sqlalchemy.exc import IntegrityError

from app.errors import Conflict
from app.storage.audit import AuditEntry, write_entry
from app.storage.db import DatabaseStore, affected_rows, utc_now
from app.storage.records import columns_of, record_of
from app.storage.tables import (
    SsoConfigRow,
    SsoExchangeCodeRow,
    SsoIdentityRow,
    SsoPendingRow,
)

_OneUse = TypeVar("_OneUse", SsoPendingRow, SsoExchangeCodeRow)
_T = TypeVar("_T")


def digest(value: str) -> str:
    """The hex SHA-256 a state or exchange code is stored under."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StoredSsoConfig:
    """A tenant's provider as stored: the secret still sealed, the rest decoded."""

    tenant_id: str
    issuer: str
    client_id: str
    client_secret_encrypted: str
    settings: dict[str, Any]
    updated_at: datetime


@dataclass(frozen=True)
class PendingSignIn:
    """What the callback needs from the sign-in it completes."""

    tenant_id: str
    nonce: str
    code_verifier: str
    redirect_uri: str
    next_path: str
    expires_at: datetime


@dataclass(frozen=True)
class CodeOwner:
    """Whom a one-time exchange code signs in."""

    tenant_id: str
    user_id: str


def _config(row: SsoConfigRow) -> StoredSsoConfig:
    return record_of(StoredSsoConfig, row, settings=json.loads(row.settings))


class SsoStore(DatabaseStore):
    """Reads and writes the single sign-on tables."""

    # --- configuration ------------------------------------------------------------------------

    def put_config(
        self,
        tenant_id: str,
        issuer: str,
        client_id: str,
        client_secret_encrypted: str,
        settings: dict[str, Any],
        audit: AuditEntry,
    ) -> StoredSsoConfig:
        """Create or replace the tenant's provider, with its audit entry."""
        now = utc_now()
        with self._db.write_session(f"sso-config:{tenant_id}") as session:
            row = session.get(SsoConfigRow, tenant_id)
            if row is None:
                row = SsoConfigRow(tenant_id=tenant_id)
                session.add(row)
            row.issuer = issuer
            row.client_id = client_id
            row.client_secret_encrypted = client_secret_encrypted
            row.settings = json.dumps(settings, sort_keys=True)
            row.updated_at = now
            write_entry(session, audit)
            session.flush()
            return _config(row)

    def config(self, tenant_id: str) -> StoredSsoConfig | None:
        """The tenant's provider, or None."""
        with self._db.session() as session:
            row = session.get(SsoConfigRow, tenant_id)
            return _config(row) if row else None

    def configs_of_issuer(self, issuer: str) -> list[StoredSsoConfig]:
        """Every tenant's provider with this exact issuer (two tenants may share one)."""
        query = select(SsoConfigRow).where(SsoConfigRow.issuer == issuer)
        with self._db.session() as session:
            return [_config(row) for row in session.scalars(query)]

    def all_configs(self) -> list[StoredSsoConfig]:
        """Every tenant's provider (to find the one that allows an email domain)."""
        with self._db.session() as session:
            return [_config(row) for row in session.scalars(select(SsoConfigRow))]

    def delete_config(self, tenant_id: str, audit: AuditEntry) -> bool:
        """Remove the tenant's provider (its users stay, linked for a later one); whether it
        had one."""
        with self._db.session() as session:
            gone = affected_rows(
                session, delete(SsoConfigRow).where(SsoConfigRow.tenant_id == tenant_id)
            )
            if gone:
                write_entry(session, audit)
            return bool(gone)

    # --- identities ---------------------------------------------------------------------------

    def user_of(self, tenant_id: str, issuer: str, subject: str) -> str | None:
        """The id of the tenant's user this provider subject is, or None."""
        query = select(SsoIdentityRow.user_id).where(
            SsoIdentityRow.tenant_id == tenant_id,
            SsoIdentityRow.issuer == issuer,
            SsoIdentityRow.subject == subject,
        )
        with self._db.session() as session:
            return session.scalars(query).first()

    def link(self, tenant_id: str, issuer: str, subject: str, user_id: str) -> None:
        """Record that the subject is this user; Conflict when it is someone else already."""
        try:
            with self._db.session() as session:
                session.add(
                    SsoIdentityRow(
                        user_id=user_id, tenant_id=tenant_id, issuer=issuer, subject=subject
                    )
                )
        except IntegrityError as exc:
            raise Conflict("this provider account is linked to another user already") from exc

    # --- sign-ins in flight -------------------------------------------------------------------

    def add_pending(self, state: str, pending: PendingSignIn) -> None:
        """Remember a sign-in sent to the provider under its state."""
        self._add_one_use(SsoPendingRow(state_hash=digest(state), **columns_of(pending)))

    def take_pending(self, state: str) -> PendingSignIn | None:
        """The sign-in of this state, once: None for an unknown, used or expired state."""
        return self._take_one_use(SsoPendingRow, state, lambda row: record_of(PendingSignIn, row))

    # --- one-time exchange codes --------------------------------------------------------------

    def add_exchange_code(
        self, code: str, tenant_id: str, user_id: str, expires_at: datetime
    ) -> None:
        """Remember a one-time code for the user."""
        self._add_one_use(
            SsoExchangeCodeRow(
                code_hash=digest(code), tenant_id=tenant_id, user_id=user_id, expires_at=expires_at
            )
        )

    def take_exchange_code(self, code: str) -> CodeOwner | None:
        """Whom a code signs in, once: None for an unknown, used or expired code."""
        return self._take_one_use(
            SsoExchangeCodeRow, code, lambda row: CodeOwner(row.tenant_id, row.user_id)
        )

    # --- states and codes alike ---------------------------------------------------------------

    def _add_one_use(self, row: _OneUse) -> None:
        """Store a state's or code's row, deleting its table's expired rows first."""
        table = type(row)
        with self._db.session() as session:
            session.execute(delete(table).where(table.expires_at <= utc_now()))
            session.add(row)

    def _take_one_use(
        self, table: type[_OneUse], value: str, read: Callable[[_OneUse], _T]
    ) -> _T | None:
        """`read` of the row stored under the value's digest, which is deleted: None when there
        is none, it expired, or another request's DELETE took it first."""
        key = digest(value)
        (key_column,) = inspect(table).primary_key
        with self._db.session() as session:
            row = session.get(table, key)
            if row is None:
                return None
            found, expires_at = read(row), row.expires_at
            taken = affected_rows(session, delete(table).where(key_column == key))
        if not taken or expires_at <= utc_now():
            return None
        return found
