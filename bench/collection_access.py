"""Resolving a caller's readable and writable collections, once per request.

    python -m bench.collection_access [--users 1000] [--groups 100] [--collections 200]
                                      [--requests 5000] [--database sqlite|postgresql]

One tenant with `users` users, `groups` groups (each user in 3), `collections` collections (half
restricted, each with 3 group grants and 2 user grants). Each request resolves a different
user, as an API process does. `warm, version read here`: one read of the tenant's access
version, then the permissions from the grants held since that version. `warm, version from the
credential`: what the API does, the version having come with the token check's own query (the
user row and the revocation check), so the resolve itself makes no round trip; that query is
timed with the version (`token check`) and without it (`token check, no version`: the same
query before the version joined it), so its added cost shows. `cold` bumps the version before
every request, so each one reloads every grant (what the first request after a change pays). A
resolve that has to compute a user's set (`first`, every user once) is measured apart from one
that finds it memoised.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import exists, select

from app.domain import Role
from app.services.collection_access import AccessResolver
from app.storage.audit import AuditEntry
from app.storage.collections import AccessStore, Grant, Visibility
from app.storage.db import Database, open_database
from app.storage.tables import RevokedTokenRow, UserRow
from app.storage.users import UserStore
from bench.common import median, percentile, table

TENANT = "bench-access"


def _populate(
    store: AccessStore, users: UserStore, n_users: int, n_groups: int, n_cols: int
) -> list[str]:
    rng = random.Random(7)
    user_ids = [users.add(TENANT, f"user{i:04d}", "x").id for i in range(n_users)]
    audit = AuditEntry(TENANT, "bench")
    groups = [store.create_group(TENANT, f"group {i}", "", audit).group_id for i in range(n_groups)]
    for user_id in user_ids:
        for group_id in rng.sample(groups, 3):
            store.set_member(TENANT, group_id, user_id, True, audit)
    for i in range(n_cols):
        visibility: Visibility = "restricted" if i % 2 else "tenant"
        made = store.create_collection(TENANT, f"collection {i}", "", visibility, audit)
        grants = [
            Grant("group", g, rng.choice(["read", "write", "manage"]))
            for g in rng.sample(groups, 3)
        ]
        grants += [Grant("user", u, "read") for u in rng.sample(user_ids, 2)]
        store.replace_grants(TENANT, made.collection_id, grants, audit)
    return user_ids


def _timed(resolver: AccessResolver, calls: Sequence[tuple[str, Role]]) -> list[float]:
    times = []
    for user_id, role in calls:
        started = time.perf_counter()
        resolver.resolve(tenant_id=TENANT, user_id=user_id, role=role)
        times.append((time.perf_counter() - started) * 1000.0)
    return times


def _token_check_without_version(database: Database, user_id: str, jti: str) -> object:
    """The token check's query as it was before the access version joined it."""
    revoked = exists().where(RevokedTokenRow.jti == jti)
    with database.session() as session:
        return session.execute(select(UserRow, revoked).where(UserRow.id == user_id)).first()


def _with_credential(
    database: Database, resolver: AccessResolver, calls: list[tuple[str, Role]]
) -> tuple[list[float], list[float], list[float]]:
    """The resolve given the version the token check read, the token check with the version,
    and the same query without it (each timed on its own)."""
    users = UserStore(database)
    resolving, checking, before = [], [], []
    for user_id, role in calls:
        started = time.perf_counter()
        version = users.get_for_token(user_id, "jti-never-revoked").access_version
        checked = time.perf_counter()
        resolver.resolve(
            tenant_id=TENANT, user_id=user_id, role=role, key_collections=None, version=version
        )
        resolved = time.perf_counter()
        _token_check_without_version(database, user_id, "jti-never-revoked")
        ended = time.perf_counter()
        checking.append((checked - started) * 1000.0)
        resolving.append((resolved - checked) * 1000.0)
        before.append((ended - resolved) * 1000.0)
    return resolving, checking, before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--collections", type=int, default=200)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--postgres-url", default="postgresql+psycopg://root@127.0.0.1:5432/test")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        url = (
            f"sqlite:///{Path(folder) / 'bench.db'}"
            if args.database == "sqlite"
            else args.postgres_url
        )
        database = open_database(url)
        store = AccessStore(database)
        started = time.perf_counter()
        user_ids = _populate(store, UserStore(database), args.users, args.groups, args.collections)
        setup_s = time.perf_counter() - started
        resolver = AccessResolver(store)
        rng = random.Random(11)
        roles: list[Role] = ["member", "member", "member", "member", "member"]
        roles += ["member", "member", "member", "reader", "admin"]
        first = _timed(resolver, [(u, "member") for u in user_ids])
        warm_calls = [(rng.choice(user_ids), rng.choice(roles)) for _ in range(args.requests)]
        warm = _timed(resolver, warm_calls)
        given, token_check, token_before = _with_credential(database, resolver, warm_calls)
        cold = []
        audit = AuditEntry(TENANT, "bench")
        group = store.groups(TENANT)[0].group.group_id
        for user_id, role in warm_calls[: max(50, args.requests // 20)]:
            store.set_member(TENANT, group, user_ids[0], rng.random() < 0.5, audit)  # a change
            cold += _timed(resolver, [(user_id, role)])
        readable = [
            len(resolver.resolve(tenant_id=TENANT, user_id=u, role="member").readable)
            for u in user_ids[:100]
        ]
        if args.database == "postgresql":
            with database.engine.begin() as connection:
                for table_name in (
                    "collection_grants",
                    "group_members",
                    "user_groups",
                    "collections",
                    "access_versions",
                    "users",
                ):
                    connection.exec_driver_sql(
                        f"DELETE FROM {table_name} WHERE tenant_id = '{TENANT}'"
                    )
        database.dispose()

    rows = [
        [name, len(times), round(median(times), 3), round(percentile(times, 95), 3)]
        for name, times in (
            ("first (computes)", first),
            ("warm, version read here", warm),
            ("warm, version from the credential", given),
            ("token check (with the version)", token_check),
            ("token check, no version (before)", token_before),
            ("cold (after a change)", cold),
        )
    ]
    print(
        f"{args.database}: {args.users} users, {args.groups} groups, "
        f"{args.collections} collections; setup {setup_s:.1f} s; "
        f"a member reads {min(readable)}-{max(readable)} collections"
    )
    print(table(["request", "n", "p50 ms", "p95 ms"], rows))


if __name__ == "__main__":
    main()
