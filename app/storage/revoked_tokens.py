"""Signed-out access tokens, refused by every API process until they would have expired.

In the database by default (every process shares it); in Redis with
RAG_REVOCATION_BACKEND=redis, where each entry expires by itself.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Protocol

import redis
from sqlalchemy import delete, select

from app.config import Settings
from app.errors import ProviderUnavailable
from app.storage.audit import AuditEntry, write_entry
from app.storage.db import Database, DatabaseStore, conflict_insert, utc_now
from app.storage.redis_client import connect_redis
from app.storage.tables import RevokedTokenRow

REDIS_DOWN = "the token revocation list (Redis) is unreachable"


class RevokedTokens(Protocol):
    """The set of revoked token ids."""

    # True: the list is the service database's `revoked_tokens` table, which the user lookup
    # can check in the same query (UserStore.get_for_token).
    in_database: bool

    def revoke(self, jti: str, expires_at: datetime, audit: AuditEntry) -> None:
        """Refuse the token from now until `expires_at`, and record the audit entry."""
        ...

    def is_revoked(self, jti: str) -> bool:
        """Whether the token was revoked."""
        ...


class DatabaseRevokedTokens(DatabaseStore):
    """Revoked token ids in the service database; expired ones are pruned as others arrive."""

    in_database = True

    def revoke(self, jti: str, expires_at: datetime, audit: AuditEntry) -> None:
        with self._db.session() as session:
            write_entry(session, audit)
            session.execute(
                conflict_insert(self._db.dialect, RevokedTokenRow)
                .values(jti=jti, expires_at=expires_at)
                .on_conflict_do_nothing(index_elements=[RevokedTokenRow.jti])
            )
            # The table holds only tokens that could still be presented.
            session.execute(delete(RevokedTokenRow).where(RevokedTokenRow.expires_at < utc_now()))

    def is_revoked(self, jti: str) -> bool:
        with self._db.session() as session:
            found = session.scalar(select(RevokedTokenRow.jti).where(RevokedTokenRow.jti == jti))
            return found is not None


class RedisRevokedTokens:
    """Revoked token ids as Redis keys that expire with the token."""

    in_database = False

    def __init__(self, client: redis.Redis[bytes], prefix: str, database: Database) -> None:
        self._client = client
        self._db = database
        self._prefix = f"{prefix}:revoked:"

    def revoke(self, jti: str, expires_at: datetime, audit: AuditEntry) -> None:
        ttl_s = max(1, math.ceil((expires_at - utc_now()).total_seconds()))
        try:
            self._client.set(self._prefix + jti, b"1", ex=ttl_s)
        except redis.RedisError as exc:
            raise ProviderUnavailable(f"{REDIS_DOWN}: {exc}") from exc
        # Written once the token is refused: the log never claims a sign-out that did not happen.
        with self._db.session() as session:
            write_entry(session, audit)

    def is_revoked(self, jti: str) -> bool:
        try:
            return bool(self._client.exists(self._prefix + jti))
        except redis.RedisError as exc:  # fail closed: an unknown state is not "valid"
            raise ProviderUnavailable(f"{REDIS_DOWN}: {exc}") from exc


def build_revoked_tokens(settings: Settings, database: Database) -> RevokedTokens:
    """The revocation list chosen by RAG_REVOCATION_BACKEND."""
    if settings.revocation_backend == "redis":
        client = connect_redis(settings.redis_url)
        return RedisRevokedTokens(client, settings.redis_key_prefix, database)
    return DatabaseRevokedTokens(database)
