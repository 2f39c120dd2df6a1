"""The user repository: who may log in, to which tenant, in which role, with which password hash.

Stores hashes only; hashing, validation and authentication live in `app.services.users`. Every
change that ends a user's sessions (disable, delete, new password) bumps the session version and
drops the user's API keys in the same transaction as the change and its audit entry; deleting a
user also deletes its conversations. Checks that must still hold at commit (the tenant's last
enabled admin, its user quota) run in a `write_session`, which locks before it reads.
"""

from __future__ import annotations

import builtins
import secrets
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, exists, func, literal, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.domain import ListedPage, Role
from app.errors import Conflict, NotFound, QuotaExceeded
from app.storage.audit import AuditEntry, write_entry
from app.storage.db import Database, utc_now
from app.storage.records import count_rows, listed_page, record_of
from app.storage.tables import (
    AccessVersionRow,
    ApiKeyRow,
    ConversationMessageRow,
    ConversationRow,
    RevokedTokenRow,
    UserRow,
    table_of,
)

LAST_ADMIN_MESSAGE = (
    "the tenant must keep at least one enabled admin: make another user admin first"
)


@dataclass(frozen=True)
class UserRecord:
    """A user as the rest of the service sees it (detached from any session)."""

    id: str
    tenant_id: str
    username: str
    password_hash: str
    created_at: datetime
    role: Role = "member"
    disabled: bool = False
    session_version: int = 0
    break_glass: bool = False


@dataclass(frozen=True)
class UserChange:
    """What to change on a user; None leaves a field as it is."""

    role: Role | None = None
    disabled: bool | None = None
    password_hash: str | None = None
    break_glass: bool | None = None

    @property
    def ends_sessions(self) -> bool:
        """Disabling or a new password ends every session and key of the user."""
        return self.disabled is True or self.password_hash is not None


@dataclass(frozen=True)
class TokenSubject:
    """What an access token's check reads about its user, in one query: the user (None when
    gone), whether the token is revoked in the database's list, and the tenant's access version."""

    user: UserRecord | None
    revoked: bool
    access_version: int


def user_record(row: UserRow) -> UserRecord:
    """The detached record of a user row."""
    return record_of(UserRecord, row)


def access_version_of_user() -> Any:
    """The access version of the tenant of the `UserRow` in the enclosing query (0 before its
    first change): read with the credential, so resolving what the caller may read costs no
    round trip of its own (app/services/collection_access.py)."""
    version = (
        select(AccessVersionRow.version)
        .where(AccessVersionRow.tenant_id == UserRow.tenant_id)
        .correlate(UserRow)
        .scalar_subquery()
    )
    return func.coalesce(version, 0)


def _token_check(revocation: bool) -> Any:
    """The token check's query: the user's row by `:user_id`, whether `:jti` is revoked (with
    `revocation`; else false), and the tenant's access version."""
    revoked = (
        exists().where(RevokedTokenRow.jti == bindparam("jti")) if revocation else literal(False)
    )
    users = table_of(UserRow)
    return select(
        *users.columns,
        revoked.label("revoked"),
        access_version_of_user().label("access_version"),
    ).where(users.c.id == bindparam("user_id"))


# Built once: a statement object keeps its cache key, so each request skips rebuilding it.
_TOKEN_CHECK = {revocation: _token_check(revocation) for revocation in (False, True)}


def _users_lock(tenant_id: str) -> str:
    """The write lock every check-then-write on a tenant's users takes (`write_session`)."""
    return f"tenant-users:{tenant_id}"


def _enabled_admins(session: Session, tenant_id: str) -> list[str]:
    """Ids of the tenant's enabled admins; read inside a `write_session`, so two admins
    demoting or deleting each other at once cannot leave the tenant without one."""
    query = (
        select(UserRow.id)
        .where(UserRow.tenant_id == tenant_id, UserRow.role == "admin", UserRow.disabled == False)  # noqa: E712
        .with_for_update()
    )
    return list(session.scalars(query))


def _end_sessions(session: Session, row: UserRow) -> None:
    row.session_version += 1
    session.execute(delete(ApiKeyRow).where(ApiKeyRow.user_id == row.id))


def _delete_user(session: Session, row: UserRow) -> None:
    """Delete the user with what only it could reach: its keys and its conversations (nobody
    else can open them, and they would count against the tenant's quota forever)."""
    owned = select(ConversationRow.conversation_id).where(
        ConversationRow.tenant_id == row.tenant_id, ConversationRow.user_id == row.id
    )
    session.execute(
        delete(ConversationMessageRow).where(ConversationMessageRow.conversation_id.in_(owned))
    )
    session.execute(
        delete(ConversationRow).where(
            ConversationRow.tenant_id == row.tenant_id, ConversationRow.user_id == row.id
        )
    )
    session.execute(delete(ApiKeyRow).where(ApiKeyRow.user_id == row.id))
    session.delete(row)


class UserStore:
    """CRUD on the users table; a user name is unique within its tenant."""

    def __init__(self, database: Database, max_users_per_tenant: int | None = None) -> None:
        self._db = database
        self.max_users_per_tenant = max_users_per_tenant  # RAG_QUOTA_USERS; None: no cap

    def add(
        self,
        tenant_id: str,
        username: str,
        password_hash: str,
        role: Role | None = None,
        audit: AuditEntry | None = None,
        break_glass: bool = False,
    ) -> UserRecord:
        """Insert a user; Conflict if the tenant has the name already, QuotaExceeded when the
        tenant has its quota of users. Without a role the tenant's first user becomes admin and
        later ones member. The audit entry's target is the new user's id."""
        row = UserRow(
            id="usr_" + secrets.token_hex(12),
            tenant_id=tenant_id,
            username=username,
            password_hash=password_hash,
            created_at=utc_now(),
            disabled=False,
            session_version=0,
            break_glass=break_glass,
        )
        try:
            with self._db.write_session(_users_lock(tenant_id)) as session:
                existing = self._count(session, tenant_id)
                self._check_quota(existing)
                if role is None:
                    role = "member" if existing else "admin"
                row.role = role
                session.add(row)
                session.flush()  # the name check fails here, before the entry is added
                if audit is not None:
                    detail = {**audit.detail, "username": username, "role": role}
                    write_entry(session, replace(audit, target_id=row.id, detail=detail))
        except IntegrityError as exc:
            # Only this tenant's names can collide: the answer tells nothing about other tenants.
            raise Conflict(f"user name {username!r} is already taken in this tenant") from exc
        return user_record(row)

    def _check_quota(self, existing: int) -> None:
        limit = self.max_users_per_tenant
        if limit is not None and existing >= limit:
            raise QuotaExceeded(
                "users",
                f"tenant quota exceeded: users (limit {limit}); delete users before adding more",
            )

    @staticmethod
    def _count(session: Session, tenant_id: str) -> int:
        return count_rows(session, UserRow, UserRow.tenant_id == tenant_id)

    def get_by_username(self, tenant_id: str, username: str) -> UserRecord | None:
        """The tenant's user with this exact name, or None."""
        query = select(UserRow).where(UserRow.tenant_id == tenant_id, UserRow.username == username)
        with self._db.session() as session:
            row = session.scalars(query).first()
            return user_record(row) if row else None

    def named(self, username: str) -> builtins.list[UserRecord]:
        """Every user with this exact name, one per tenant at most: enabled ones first, then
        the oldest first (the one that had the name before names were per tenant)."""
        query = (
            select(UserRow)
            .where(UserRow.username == username)
            .order_by(UserRow.disabled, UserRow.created_at, UserRow.id)
        )
        with self._db.session() as session:
            return [user_record(row) for row in session.scalars(query)]

    def get(self, user_id: str) -> UserRecord | None:
        """The user with this id, or None (a token's subject may outlive its user)."""
        with self._db.session() as session:
            row = session.get(UserRow, user_id)
            return user_record(row) if row else None

    def get_for_token(self, user_id: str, revoked_jti: str | None) -> TokenSubject:
        """The user with this id, whether the token `revoked_jti` is in the database's
        revocation list (False when None: the list is elsewhere), and its tenant's access
        version, in one query: the check every request with an access token makes (a statement
        built once, read on a plain connection: no ORM session to set up per request)."""
        checked = revoked_jti is not None
        found = self._db.first_row(
            _TOKEN_CHECK[checked], {"user_id": user_id, "jti": revoked_jti or ""}
        )
        if found is None:
            return TokenSubject(user=None, revoked=False, access_version=0)
        return TokenSubject(
            user=record_of(UserRecord, found),
            revoked=bool(found.revoked),
            access_version=int(found.access_version),
        )

    def list(self, tenant_id: str | None = None) -> list[UserRecord]:
        """Users of one tenant, or of every tenant, ordered by tenant then name."""
        query = select(UserRow).order_by(UserRow.tenant_id, UserRow.username)
        if tenant_id is not None:
            query = query.where(UserRow.tenant_id == tenant_id)
        with self._db.session() as session:
            return [user_record(row) for row in session.scalars(query)]

    def page(self, tenant_id: str, limit: int, offset: int) -> ListedPage[UserRecord]:
        """One page of the tenant's users by name, and how many it has."""
        where = [UserRow.tenant_id == tenant_id]
        query = select(UserRow).order_by(UserRow.username)
        with self._db.session() as session:
            return listed_page(session, query, where, UserRow, limit, offset, user_record)

    def change(
        self, tenant_id: str, user_id: str, change: UserChange, audit: AuditEntry | None = None
    ) -> UserRecord:
        """Apply a change to the tenant's user; NotFound (also for another tenant's id), or
        Conflict when it would leave the tenant without an enabled admin (nothing changes)."""
        with self._db.write_session(_users_lock(tenant_id)) as session:
            admins = _enabled_admins(session, tenant_id)
            row = self._row(session, tenant_id, user_id)
            stays_admin = (change.role or row.role) == "admin" and not (
                change.disabled if change.disabled is not None else row.disabled
            )
            if admins == [row.id] and not stays_admin:
                raise Conflict(LAST_ADMIN_MESSAGE)
            detail: dict[str, object] = {}
            if change.role is not None and change.role != row.role:
                detail["role"] = [row.role, change.role]
                row.role = change.role
            if change.disabled is not None and change.disabled != row.disabled:
                detail["disabled"] = change.disabled
                row.disabled = change.disabled
            if change.break_glass is not None and change.break_glass != row.break_glass:
                detail["break_glass"] = change.break_glass
                row.break_glass = change.break_glass
            if change.password_hash is not None:
                detail["password"] = "changed"
                row.password_hash = change.password_hash
            if change.ends_sessions:
                _end_sessions(session, row)
            if audit is not None:
                write_entry(
                    session, replace(audit, target_id=row.id, detail={**audit.detail, **detail})
                )
            return user_record(row)

    def end_sessions(self, user_id: str, audit: AuditEntry | None = None) -> None:
        """Bump the user's session version ("sign out everywhere"); API keys stay valid."""
        with self._db.session() as session:
            session.execute(
                update(UserRow)
                .where(UserRow.id == user_id)
                .values(session_version=UserRow.session_version + 1)
            )
            if audit is not None:
                write_entry(session, audit)

    def remove(self, tenant_id: str, user_id: str, audit: AuditEntry | None = None) -> UserRecord:
        """Delete the tenant's user with its keys and conversations; NotFound, or Conflict for
        the last admin."""
        with self._db.write_session(_users_lock(tenant_id)) as session:
            admins = _enabled_admins(session, tenant_id)
            row = self._row(session, tenant_id, user_id)
            if admins == [row.id]:
                raise Conflict(LAST_ADMIN_MESSAGE)
            record = user_record(row)
            _delete_user(session, row)
            if audit is not None:
                detail = {**audit.detail, "username": row.username}
                write_entry(session, replace(audit, target_id=row.id, detail=detail))
            return record

    def delete(self, tenant_id: str, username: str) -> bool:
        """Remove the tenant's user (with its keys and conversations) by name, whatever its role
        (the CLI's operator override); returns whether one existed."""
        query = select(UserRow).where(UserRow.tenant_id == tenant_id, UserRow.username == username)
        with self._db.session() as session:
            row = session.scalars(query).first()
            if row is None:
                return False
            _delete_user(session, row)
            return True

    @staticmethod
    def _row(session: Session, tenant_id: str, user_id: str) -> UserRow:
        row = session.get(UserRow, user_id)
        if row is None or row.tenant_id != tenant_id:
            raise NotFound("user not found")
        return row
