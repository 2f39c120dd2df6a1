"""The login guard on a fake clock, with the real user service (SQLite, bcrypt): which attempts
count against whom, and how password checks are bounded."""

from __future__ import annotations

import threading
import time

import pytest

from app.errors import AuthenticationFailed, RateLimited
from app.services.login import HashSlots, LoginGuard
from app.services.users import UserService
from app.storage.db import Database
from app.storage.rate_limit import MemoryRateLimiter
from app.storage.users import UserStore

pytestmark = pytest.mark.unit

PASSWORD = "correct horse battery staple"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def users(tmp_path_factory: pytest.TempPathFactory) -> UserService:
    database = Database(f"sqlite:///{tmp_path_factory.mktemp('login') / 'rag.db'}")
    database.migrate()
    service = UserService(UserStore(database), 12)
    service.create_user("acme", "alice", PASSWORD)
    return service


def guard(
    users: UserService, clock: FakeClock, *, per_ip: int = 100, failures: int = 2
) -> LoginGuard:
    return LoginGuard(
        users,
        MemoryRateLimiter(clock),
        HashSlots(2, 4),
        attempts_per_ip=per_ip,
        failures_per_account=failures,
    )


def test_refused_attempts_do_not_extend_a_lockout(users: UserService) -> None:
    clock = FakeClock()
    login = guard(users, clock)
    for _ in range(2):
        with pytest.raises(AuthenticationFailed):
            login.login("alice", "wrong", "10.0.0.1")
    clock.now += 30
    for _ in range(20):  # hammering while locked
        with pytest.raises(RateLimited) as refused:
            login.login("alice", PASSWORD, "10.0.0.1")
    assert refused.value.retry_after_s == pytest.approx(30.0)  # still from the first failure
    clock.now += 30
    assert login.login("alice", PASSWORD, "10.0.0.1").username == "alice"


def test_failures_are_counted_per_user_and_client(users: UserService) -> None:
    clock = FakeClock()
    login = guard(users, clock)
    for _ in range(2):
        with pytest.raises(AuthenticationFailed):
            login.login("Alice", "wrong", "10.0.0.66")  # the name is normalised
    with pytest.raises(RateLimited):
        login.login("alice", PASSWORD, "10.0.0.66")
    assert login.login("alice", PASSWORD, "10.0.0.2").username == "alice"


def test_the_ip_budget_is_checked_first_and_counts_every_attempt(users: UserService) -> None:
    clock = FakeClock()
    login = guard(users, clock, per_ip=3, failures=100)
    assert login.login("alice", PASSWORD, "10.0.0.3").username == "alice"
    for name in ("bob", "carol"):
        with pytest.raises(AuthenticationFailed):
            login.login(name, "wrong", "10.0.0.3")
    with pytest.raises(RateLimited):
        login.login("alice", PASSWORD, "10.0.0.3")


def test_busy_password_checks_refuse_the_excess_at_once() -> None:
    slots = HashSlots(1, 1, wait_s=5.0)
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
    began = time.perf_counter()
    with pytest.raises(RateLimited) as busy, slots.slot():
        pass
    # Refused at once: waiting for the queue would take the full 5 s slot wait.
    assert time.perf_counter() - began < 2.5
    assert busy.value.retry_after_s >= 1
    release.set()
    first.join()
    second.join()
    assert waiter_result == ["got it"]
