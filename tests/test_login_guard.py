"""The login guard with the real user service (SQLite, bcrypt): which attempts count against
whom, how one account is paced when many clients guess at it, and how password checks are
bounded. On the memory limiter with a fake clock, and the pacing also on the real Redis."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pytest

from app.errors import AccountLocked, AuthenticationFailed, RateLimited
from app.services.audit import AuditLog
from app.services.login import DAY_S, PACE_STEPS_S, HashSlots, LoginGuard, client_bucket
from app.services.users import LoginTarget, UserService
from app.storage.audit import AuditStore
from app.storage.db import Database
from app.storage.rate_limit import MemoryRateLimiter, RateLimiter, RedisRateLimiter
from app.storage.users import UserStore
from tests.bcrypt_cost import record_password_checks
from tests.fake_clock import FakeClock

PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Database:
    database = Database(f"sqlite:///{tmp_path_factory.mktemp('login') / 'rag.db'}")
    database.migrate()
    return database


@pytest.fixture(scope="module")
def users(database: Database) -> UserService:
    # Real bcrypt at its cheapest cost: the limits around the check are under test, not its
    # price, and these tests make dozens of checks.
    service = UserService(UserStore(database), 4)
    service.create_user(tenant_id="acme", username="alice", password=PASSWORD)
    return service


def guard(
    users: UserService,
    clock: FakeClock,
    *,
    per_ip: int = 100,
    failures: int = 2,
    per_account: int = 100,
    per_day: int = 10_000,
    limiter: RateLimiter | None = None,
    audit: AuditLog | None = None,
) -> LoginGuard:
    return LoginGuard(
        users,
        limiter or MemoryRateLimiter(clock),
        HashSlots(2, 4),
        attempts_per_ip=per_ip,
        failures_per_client=failures,
        failures_per_account=per_account,
        daily_failures_per_account=per_day,
        audit=audit,
    )


def wrong_guesses(
    login: LoginGuard, username: str, clients: Iterable[str], *, tenant: str | None = None
) -> None:
    """A wrong password for `username` from each client in turn, each refused as wrong."""
    for client in clients:
        with pytest.raises(AuthenticationFailed):
            login.login(username, "a wrong guess", client, tenant=tenant)


@pytest.mark.unit
def test_refused_attempts_do_not_extend_a_lockout(users: UserService) -> None:
    clock = FakeClock()
    login = guard(users, clock)
    wrong_guesses(login, "alice", ["10.0.0.1"] * 2)
    clock.now += 30
    for _ in range(20):  # hammering while locked
        with pytest.raises(RateLimited) as refused:
            login.login("alice", PASSWORD, "10.0.0.1")
    assert refused.value.retry_after_s == pytest.approx(30.0)  # still from the first failure
    clock.now += 30
    assert login.login("alice", PASSWORD, "10.0.0.1").username == "alice"


@pytest.mark.unit
def test_failures_are_counted_per_user_and_client(users: UserService) -> None:
    clock = FakeClock()
    login = guard(users, clock)
    wrong_guesses(login, "Alice", ["10.0.0.66"] * 2)  # the name is normalised
    with pytest.raises(RateLimited):
        login.login("alice", PASSWORD, "10.0.0.66")
    assert login.login("alice", PASSWORD, "10.0.0.2").username == "alice"


@pytest.mark.unit
def test_the_ip_budget_is_checked_first_and_counts_every_attempt(users: UserService) -> None:
    clock = FakeClock()
    login = guard(users, clock, per_ip=3, failures=100)
    assert login.login("alice", PASSWORD, "10.0.0.3").username == "alice"
    wrong_guesses(login, "bob", ["10.0.0.3"])
    wrong_guesses(login, "carol", ["10.0.0.3"])
    with pytest.raises(RateLimited):
        login.login("alice", PASSWORD, "10.0.0.3")


@pytest.mark.unit
def test_busy_password_checks_refuse_the_excess_at_once() -> None:
    slots = HashSlots(1, 1, wait_s=600.0)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with slots.slot():
            holding.set()
            release.wait()

    waiter_result: list[str] = []

    def wait_for_slot() -> None:
        with slots.slot():
            waiter_result.append("got it")

    first = threading.Thread(target=hold)
    first.start()
    holding.wait()
    second = threading.Thread(target=wait_for_slot)  # the one allowed to queue
    second.start()
    deadline = time.monotonic() + 30  # until the second check is in the queue, not a fixed nap
    while slots._waiting < 1:
        assert time.monotonic() < deadline, "the second check never queued"
        time.sleep(0.005)
    # The third finds the queue full while the first still holds the slot: refused without
    # queueing. Had it queued, it would get the slot after the second once the first is done.
    third_result: list[str] = []
    refused: list[RateLimited] = []

    def third() -> None:
        try:
            with slots.slot():
                third_result.append("got it")
        except RateLimited as exc:
            refused.append(exc)

    third_thread = threading.Thread(target=third)
    third_thread.start()
    while third_thread.is_alive() and slots._waiting < 2:
        assert time.monotonic() < deadline, "the third check neither ended nor queued"
        time.sleep(0.005)
    release.set()
    for thread in (first, second, third_thread):
        thread.join()
    assert waiter_result == ["got it"]
    assert third_result == [] and len(refused) == 1
    assert refused[0].retry_after_s >= 1
    assert waiter_result == ["got it"]


# --- clients by /64, and one account guessed at from many clients ------------------------------


@dataclass
class Backend:
    """A limiter and a way to let time pass for it (a fake clock, or real seconds on Redis)."""

    limiter: RateLimiter
    wait: Callable[[float], None]


@pytest.fixture(
    params=[
        pytest.param("memory", marks=pytest.mark.unit),
        pytest.param("redis", marks=pytest.mark.integration),
    ]
)
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == "memory":
        clock = FakeClock()

        def advance(seconds: float) -> None:
            clock.now += seconds

        return Backend(MemoryRateLimiter(clock), advance)
    namespace = request.getfixturevalue("redis_namespace")
    return Backend(RedisRateLimiter(namespace.client, prefix=namespace.prefix), time.sleep)


class CountingUsers:
    """The real user service, counting the password checks the guard lets through."""

    def __init__(self, users: UserService) -> None:
        self.users = users
        self.checks = 0

    def login_target(self, username: str, tenant: str | None = None) -> LoginTarget:
        return self.users.login_target(username, tenant=tenant)

    def check_login(self, target: LoginTarget, password: str) -> Any:
        self.checks += 1
        return self.users.check_login(target, password)


def paced_guard(users: Any, limiter: RateLimiter, per_account: int = 2) -> LoginGuard:
    """Generous per-client limits, so only the account's own pace refuses anything."""
    return LoginGuard(
        users,
        limiter,
        HashSlots(2, 4),
        attempts_per_ip=100,
        failures_per_client=100,
        failures_per_account=per_account,
        daily_failures_per_account=10_000,
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("client", "bucket"),
    [
        ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("::ffff:10.0.0.9", "10.0.0.9"),
        ("10.0.0.9", "10.0.0.9"),
        ("unknown", "unknown"),
    ],
)
def test_a_client_is_its_ipv4_address_or_its_ipv6_64(client: str, bucket: str) -> None:
    assert client_bucket(client) == bucket


@pytest.mark.unit
def test_an_ipv6_client_gets_one_budget_per_64_not_per_address(users: UserService) -> None:
    login = guard(users, FakeClock(), per_ip=3, failures=100)
    for host in ("1", "2", "3"):
        with pytest.raises(AuthenticationFailed):
            login.login(f"nobody{host}", "a guess", f"2001:db8:5:6::{host}")
    with pytest.raises(RateLimited):  # another address of the same /64: the same client
        login.login("alice", PASSWORD, "2001:db8:5:6:ffff:ffff:ffff:fffe")
    assert login.login("alice", PASSWORD, "2001:db8:5:7::1").username == "alice"  # the next /64

    # Rotating addresses inside the /64 does not reset the failures of (user, client) either.
    login = guard(users, FakeClock(), failures=2)
    wrong_guesses(login, "alice", ["2001:db8:9:9::a", "2001:db8:9:9::b"])
    with pytest.raises(RateLimited):
        login.login("alice", PASSWORD, "2001:db8:9:9::c")


def test_many_clients_together_are_paced_on_one_account(
    users: UserService, backend: Backend
) -> None:
    counting = CountingUsers(users)
    login = paced_guard(counting, backend.limiter, per_account=2)
    # Each client stays far below its own limits; together they reach the account's budget.
    wrong_guesses(login, "alice", ["10.1.0.1", "10.1.0.2", "10.1.0.3"])
    checks = counting.checks
    assert checks == 3  # the third was the first paced check: it held the account for 1 s
    for client in ("10.1.0.4", "10.1.0.5"):
        with pytest.raises(RateLimited) as paced:
            login.login("alice", PASSWORD, client)  # not even the right password is checked
        assert 0 < paced.value.retry_after_s <= PACE_STEPS_S[0]
    assert counting.checks == checks  # refused before any bcrypt work
    backend.wait(paced.value.retry_after_s + 0.05)
    assert login.login("alice", PASSWORD, "10.1.0.4").username == "alice"  # a slow-down, not a lock


def test_an_accounts_own_clients_are_never_paced(users: UserService, backend: Backend) -> None:
    login = paced_guard(users, backend.limiter, per_account=2)
    assert login.login("alice", PASSWORD, "192.0.2.10").username == "alice"  # her office
    assert login.login("alice", PASSWORD, "2001:db8:aa:bb::1").username == "alice"  # her phone
    # Then someone guesses from many places.
    wrong_guesses(login, "alice", ["10.2.0.1", "10.2.0.2", "10.2.0.3"])
    with pytest.raises(RateLimited):  # a client new to the account waits its turn...
        login.login("alice", PASSWORD, "198.51.100.7")
    # ...but hers get in at once, the phone from another address of its /64.
    assert login.login("alice", PASSWORD, "192.0.2.10").username == "alice"
    assert login.login("alice", PASSWORD, "2001:db8:aa:bb:1234::5").username == "alice"


@pytest.mark.unit
def test_the_pace_slows_as_failures_grow_and_stops_at_a_few_seconds(users: UserService) -> None:
    clock = FakeClock()
    login = guard(users, clock, failures=100, per_account=2)
    waits: list[float] = []  # how long each guess (from a fresh client) had to wait
    for attempt in range(12):
        client = f"10.4.{attempt}.1"
        waited = 0.0
        while True:
            try:
                login.login("alice", "wrong again", client)
            except RateLimited as paced:
                for _ in range(20):  # hammering during the wait changes nothing
                    with pytest.raises(RateLimited) as again:
                        login.login("alice", "hammer", f"10.5.{attempt}.1")
                    assert again.value.retry_after_s == pytest.approx(paced.retry_after_s)
                waited += paced.retry_after_s
                clock.now += paced.retry_after_s
                continue
            except AuthenticationFailed:
                break
        waits.append(waited)
    # 2 failures free, then one check per 1 s, per 2 s from 4 failures, per 4 s from 8, no more.
    assert waits == pytest.approx([0, 0, 0, 1, 1, 2, 2, 2, 2, 4, 4, 4])
    assert max(waits) == PACE_STEPS_S[-1]


@pytest.mark.unit
def test_an_unknown_name_is_paced_and_checked_like_a_real_one(
    users: UserService, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = record_password_checks(monkeypatch)
    outcomes: dict[str, list[object]] = {}
    checks: dict[str, int] = {}
    for name in ("alice", "nobody-here"):
        login = guard(users, FakeClock(), failures=100, per_account=2)
        checked.clear()
        results: list[object] = []
        for attempt in range(4):
            try:
                login.login(name, "wrong guess", f"10.6.{attempt}.1")
            except RateLimited as paced:
                results.append(("paced", paced.retry_after_s))
            except AuthenticationFailed:
                results.append("failed")
        outcomes[name], checks[name] = results, len(checked)
    # The same answers and the same bcrypt work whether or not the user exists: an unknown
    # name still costs one check against the dummy hash (timing says nothing), and is paced.
    assert outcomes["alice"] == outcomes["nobody-here"] == ["failed"] * 3 + [("paced", 1.0)]
    assert checks["alice"] == checks["nobody-here"] == 3


# --- a daily cap per account --------------------------------------------------------------------


def test_a_days_failures_lock_new_clients_out_but_never_the_owners(
    users: UserService, database: Database, backend: Backend
) -> None:
    audit = AuditLog(AuditStore(database), retention_days=30)
    before = audit.page(tenant_id="acme", limit=100, offset=0, action="login.locked").total
    counting = CountingUsers(users)
    login = LoginGuard(
        counting,  # type: ignore[arg-type]
        backend.limiter,
        HashSlots(2, 4),
        attempts_per_ip=100,
        failures_per_client=100,
        failures_per_account=10_000,  # no pace: only the day's cap is under test
        daily_failures_per_account=5,
        audit=audit,
    )
    assert login.login("alice", PASSWORD, "192.0.2.20").username == "alice"  # her laptop
    # A guess from each of many addresses, as a botnet rotates them.
    wrong_guesses(login, "alice", [f"10.9.{attempt}.1" for attempt in range(5)])
    checks = counting.checks
    for client in ("10.9.9.1", "203.0.113.5"):  # new clients: refused, no password checked
        with pytest.raises(AccountLocked) as locked:
            login.login("alice", PASSWORD, client)
        assert locked.value.code == "account_locked"
        assert DAY_S - 60 < locked.value.retry_after_s <= DAY_S
    assert counting.checks == checks
    # Her laptop still signs in: the lock is for clients new to the account.
    assert login.login("alice", PASSWORD, "192.0.2.20").username == "alice"
    # The lock is in the tenant's audit log once, naming the account, not once per refusal.
    found = audit.page(tenant_id="acme", limit=100, offset=0, action="login.locked")
    assert found.total == before + 1
    entry = found.records[0]
    assert entry.detail["username"] == "alice" and entry.detail["failures"] == 5
    assert entry.client_ip == "10.9.4.1"


@pytest.mark.unit
def test_the_lock_ends_with_the_day_and_another_tenants_name_is_its_own_account(
    users: UserService,
) -> None:
    users.create_user(tenant_id="acme", username="erin", password=PASSWORD)
    users.create_user(tenant_id="globex", username="erin", password="another long enough secret")
    clock = FakeClock()
    login = guard(users, clock, failures=100, per_day=3)
    wrong_guesses(login, "erin", [f"10.10.{attempt}.1" for attempt in range(3)], tenant="acme")
    with pytest.raises(AccountLocked):
        login.login("erin", PASSWORD, "10.10.9.1", tenant="acme")
    # globex's erin is another account: the guesses at acme's do not lock her.
    other = login.login("erin", "another long enough secret", "10.10.9.1", tenant="globex")
    assert other.tenant_id == "globex"
    clock.now += DAY_S
    assert login.login("erin", PASSWORD, "10.10.9.1", tenant="acme").tenant_id == "acme"
