"""The user repository: who may log in, to which tenant, with which password hash.

Stores hashes only; hashing, validation and authentication live in `app.services.users`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from app.errors import Conflict
from app.storage.db import Database, utc_now
from app.storage.tables import UserRow


@dataclass(frozen=True)
class UserRecord:
    """A user as the rest of the service sees it (detached from any session)."""

    id: str
    tenant_id: str
    username: str
    password_hash: str
    created_at: datetime


def _record(row: UserRow) -> UserRecord:
    return UserRecord(
        id=row.id,
        tenant_id=row.tenant_id,
        username=row.username,
        password_hash=row.password_hash,
        created_at=row.created_at,
    )


class UserStore:
    """CRUD on the users table; user names are unique across all tenants (login has no tenant)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def add(self, tenant_id: str, username: str, password_hash: str) -> UserRecord:
        """Insert a user; raises Conflict if the user name is taken."""
        row = UserRow(
            id="usr_" + secrets.token_hex(12),
            tenant_id=tenant_id,
            username=username,
            password_hash=password_hash,
            created_at=utc_now(),
        )
        try:
            with self._db.session() as session:
                session.add(row)
        except IntegrityError as exc:
            raise Conflict(f"user name {username!r} is already taken") from exc
        return _record(row)

    def get_by_username(self, username: str) -> UserRecord | None:
        """The user with this exact name, or None."""
        with self._db.session() as session:
            row = session.scalars(select(UserRow).where(UserRow.username == username)).first()
            return _record(row) if row else None

    def get(self, user_id: str) -> UserRecord | None:
        """The user with this id, or None (a token's subject may outlive its user)."""
        with self._db.session() as session:
            row = session.get(UserRow, user_id)
            return _record(row) if row else None

    def list(self, tenant_id: str | None = None) -> list[UserRecord]:
        """Users of one tenant, or of every tenant, ordered by tenant then name."""
        query = select(UserRow).order_by(UserRow.tenant_id, UserRow.username)
        if tenant_id is not None:
            query = query.where(UserRow.tenant_id == tenant_id)
        with self._db.session() as session:
            return [_record(row) for row in session.scalars(query)]

    def delete(self, username: str) -> bool:
        """Remove a user by name; returns whether one existed."""
        with self._db.session() as session:
            result = session.execute(delete(UserRow).where(UserRow.username == username))
            return bool(result.rowcount)  # type: ignore[attr-defined]
