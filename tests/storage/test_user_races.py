"""Check-then-write guards under real concurrency, on a SQLite file and the local PostgreSQL:
two admins demoting or deleting each other at once keep one admin, a tenant's first users
added at once get one admin, and the user and key caps hold when many creates arrive together.

SQLite ignores `SELECT ... FOR UPDATE`, so each guard must take the write lock before it reads
(a race an audit found). Every race starts its threads at a barrier and runs many rounds, since a
single round can fall either way by luck.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Callable
from datetime import timedelta
from functools import partial

import pytest

from app.errors import Conflict, QuotaExceeded
from app.storage.api_keys import ApiKeyRecord, ApiKeyStore
from app.storage.audit import AuditEntry
from app.storage.db import Database, utc_now
from app.storage.users import UserChange, UserRecord, UserStore

pytestmark = pytest.mark.integration

ROUNDS = 30
_names = itertools.count(1)


def _at_once(*actions: Callable[[], object]) -> list[BaseException | None]:
    """Run the actions in threads released together; each one's exception, or None."""
    barrier = threading.Barrier(len(actions))
    outcomes: list[BaseException | None] = [None] * len(actions)

    def run(index: int, action: Callable[[], object]) -> None:
        barrier.wait()
        try:
            action()
        except Exception as exc:  # the test inspects what each thread met
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=pair) for pair in enumerate(actions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a racing thread hung"
    return outcomes


def _user(store: UserStore, tenant: str, role: str | None = "admin") -> UserRecord:
    return store.add(tenant, f"racer{next(_names)}", "not-a-real-hash", role)  # type: ignore[arg-type]


def _enabled_admins(store: UserStore, tenant: str) -> list[str]:
    return [u.id for u in store.list(tenant) if u.role == "admin" and not u.disabled]


DEMOTE = UserChange(role="member")
DISABLE = UserChange(disabled=True)


def _demote(store: UserStore, tenant: str, user: UserRecord) -> Callable[[], object]:
    return lambda: store.change(tenant, user.id, DEMOTE)


def _disable(store: UserStore, tenant: str, user: UserRecord) -> Callable[[], object]:
    return lambda: store.change(tenant, user.id, DISABLE)


def _delete(store: UserStore, tenant: str, user: UserRecord) -> Callable[[], object]:
    return lambda: store.remove(tenant, user.id)


RACES = {
    "demote-demote": (_demote, _demote),
    "delete-delete": (_delete, _delete),
    "demote-delete": (_demote, _delete),
    "disable-delete": (_disable, _delete),
}


@pytest.mark.parametrize("race", sorted(RACES))
def test_two_admins_acting_on_each_other_at_once_leave_one_admin(
    sql_database: Database, race: str
) -> None:
    store = UserStore(sql_database)
    first_action, second_action = RACES[race]
    lost: list[int] = []
    for round_ in range(ROUNDS):
        tenant = f"race-{race}-{round_}"
        first, second = _user(store, tenant), _user(store, tenant)
        outcomes = _at_once(
            first_action(store, tenant, second), second_action(store, tenant, first)
        )
        admins = _enabled_admins(store, tenant)
        if len(admins) != 1:
            lost.append(round_)
            continue
        # Exactly one of the two went through; the other was refused, naming the last admin.
        refused = [o for o in outcomes if o is not None]
        assert len(refused) == 1 and isinstance(refused[0], Conflict), outcomes
    assert lost == [], f"{len(lost)} of {ROUNDS} rounds left the tenant without an enabled admin"


def test_a_tenants_first_users_added_at_once_get_exactly_one_admin(
    sql_database: Database,
) -> None:
    store = UserStore(sql_database)
    for round_ in range(ROUNDS // 3):
        tenant = f"first-{round_}"
        outcomes = _at_once(*[partial(_user, store, tenant, role=None) for _ in range(4)])
        assert outcomes == [None] * 4
        assert len(_enabled_admins(store, tenant)) == 1, store.list(tenant)


def test_the_users_quota_holds_when_many_are_added_at_once(sql_database: Database) -> None:
    store = UserStore(sql_database, max_users_per_tenant=3)
    for round_ in range(ROUNDS // 3):
        tenant = f"quota-{round_}"
        outcomes = _at_once(*[partial(_user, store, tenant, role="member") for _ in range(6)])
        refused = [o for o in outcomes if o is not None]
        assert len(refused) == 3 and all(isinstance(o, QuotaExceeded) for o in refused), outcomes
        assert all(o.quota == "users" for o in refused if isinstance(o, QuotaExceeded))
        assert len(store.list(tenant)) == 3


def _key(tenant: str, user_id: str, expires_in: timedelta | None = None) -> ApiKeyRecord:
    now = utc_now()
    number = next(_names)
    return ApiKeyRecord(
        key_id=f"key_race{number}",
        tenant_id=tenant,
        user_id=user_id,
        name="race",
        role="member",
        prefix="rag_test",
        created_at=now,
        expires_at=now + expires_in if expires_in is not None else None,
        last_used_at=None,
    )


def _add_key(keys: ApiKeyStore, record: ApiKeyRecord, cap: int) -> ApiKeyRecord:
    audit = AuditEntry(record.tenant_id, "key.created", target_id=record.key_id)
    # A distinct hash per key id ("key_race1" and "key_race10" padded with zeros were the same).
    key_hash = hashlib.sha256(record.key_id.encode()).hexdigest()
    return keys.add(record, key_hash, audit, max_active_per_user=cap)


def test_the_keys_cap_holds_when_many_are_made_at_once(sql_database: Database) -> None:
    keys = ApiKeyStore(sql_database)
    for round_ in range(ROUNDS // 3):
        tenant, user_id = f"keys-{round_}", f"usr_keys{round_}"
        records = [_key(tenant, user_id) for _ in range(6)]
        outcomes = _at_once(*[partial(_add_key, keys, record, 3) for record in records])
        refused = [o for o in outcomes if o is not None]
        assert len(refused) == 3 and all(isinstance(o, QuotaExceeded) for o in refused), outcomes
        assert len(keys.list(tenant, user_id)) == 3


def test_expired_keys_do_not_count_against_the_cap(sql_database: Database) -> None:
    keys = ApiKeyStore(sql_database)
    tenant, user_id = "keys-expired", "usr_expired"
    _add_key(keys, _key(tenant, user_id, expires_in=timedelta(seconds=-1)), 1)
    _add_key(keys, _key(tenant, user_id), 1)  # the expired one leaves room for one
    with pytest.raises(QuotaExceeded):
        _add_key(keys, _key(tenant, user_id), 1)
