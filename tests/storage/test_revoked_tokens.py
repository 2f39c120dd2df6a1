"""The revocation list and API key bookkeeping on real SQLite, PostgreSQL and Redis: what one
process revokes, another (its own engine or client) refuses; expired entries go; a key's
last use is written at most once a minute; a refused state is never read as "valid"."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from app.errors import ProviderUnavailable
from app.storage.api_keys import ApiKeyRecord, ApiKeyStore
from app.storage.audit import AuditEntry, AuditStore
from app.storage.db import Database, open_database, utc_now
from app.storage.redis_client import connect_redis
from app.storage.revoked_tokens import DatabaseRevokedTokens, RedisRevokedTokens, RevokedTokens
from app.storage.tables import RevokedTokenRow

pytestmark = pytest.mark.integration

REDIS_TEST_URL = os.environ.get("RAG_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
LOGOUT = AuditEntry(tenant_id="acme", action="logout", user_id="usr_1", client_ip="10.0.0.1")


def _actions(database: Database) -> list[str]:
    return [e.action for e in AuditStore(database).list("acme", 100).records]


# The behaviour both revocation lists share, run on each (RAG_REVOCATION_BACKEND).
Processes = Callable[[], RevokedTokens]  # a new process's view of the one revocation list


@pytest.fixture(params=["database", "redis"])
def processes(request: pytest.FixtureRequest, sql_database: Database) -> Iterator[Processes]:
    """Makes revocation lists as separate processes would have them: each with its own
    database engine, or its own Redis client on one key prefix."""
    engines: list[Database] = []
    if request.param == "database":

        def process() -> RevokedTokens:
            engines.append(open_database(sql_database.url))
            return DatabaseRevokedTokens(engines[-1])

    else:
        prefix = request.getfixturevalue("redis_namespace").prefix

        def process() -> RevokedTokens:
            return RedisRevokedTokens(connect_redis(REDIS_TEST_URL), prefix, sql_database)

    try:
        yield process
    finally:
        for engine in engines:
            engine.dispose()


def test_a_token_revoked_by_one_process_is_refused_by_another(
    processes: Processes, sql_database: Database
) -> None:
    first, second = processes(), processes()
    expires = utc_now() + timedelta(hours=1)
    assert not second.is_revoked("jti-1")
    first.revoke("jti-1", expires, LOGOUT)
    first.revoke("jti-1", expires, LOGOUT)  # signing out twice is no error
    assert second.is_revoked("jti-1") and not second.is_revoked("jti-2")
    assert _actions(sql_database) == ["logout", "logout"]  # each sign-out in the audit log


def test_expired_revocations_are_pruned(sql_database: Database) -> None:
    tokens = DatabaseRevokedTokens(sql_database)
    tokens.revoke("old", utc_now() - timedelta(seconds=1), LOGOUT)
    tokens.revoke("new", utc_now() + timedelta(hours=1), LOGOUT)
    with sql_database.session() as session:
        kept = session.scalars(select(RevokedTokenRow.jti)).all()
        assert kept == ["new"]
        assert session.scalar(select(func.count()).select_from(RevokedTokenRow)) == 1


def test_redis_revocations_expire_with_the_token(
    redis_namespace: Any, sql_database: Database
) -> None:
    tokens = RedisRevokedTokens(connect_redis(REDIS_TEST_URL), redis_namespace.prefix, sql_database)
    tokens.revoke("jti-r", utc_now() + timedelta(seconds=90), LOGOUT)
    ttl = redis_namespace.client.ttl(f"{redis_namespace.prefix}:revoked:jti-r")
    assert 80 <= ttl <= 90


def test_an_unreachable_redis_refuses_rather_than_accepts(sql_database: Database) -> None:
    down = RedisRevokedTokens(connect_redis("redis://127.0.0.1:1/0"), "x", sql_database)
    with pytest.raises(ProviderUnavailable):
        down.is_revoked("jti")
    with pytest.raises(ProviderUnavailable):
        down.revoke("jti", utc_now() + timedelta(hours=1), LOGOUT)
    assert _actions(sql_database) == []  # no sign-out is recorded that did not happen


def test_a_keys_last_use_is_written_at_most_once_a_minute(sql_database: Database) -> None:
    store = ApiKeyStore(sql_database)
    now = utc_now()
    record = ApiKeyRecord("key_1", "acme", "usr_1", "cron", "reader", "rag_abcd", now, None, None)
    store.add(record, "f" * 64, LOGOUT)
    store.touch(store.list("acme", "usr_1")[0], now)
    [used] = store.list("acme", "usr_1")
    assert used.last_used_at == now
    store.touch(used, now + timedelta(seconds=30))  # within the minute: nothing written
    assert store.list("acme", "usr_1")[0].last_used_at == now
    later = now + timedelta(seconds=61)
    store.touch(used, later)
    assert store.list("acme", "usr_1")[0].last_used_at == later
    assert store.find("f" * 64) is not None and store.find("e" * 64) is None
