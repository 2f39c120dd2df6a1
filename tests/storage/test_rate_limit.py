"""The in-memory sliding-window rate limiter, on a fake clock."""

from __future__ import annotations

import threading

import pytest

from app.config import Settings
from app.storage.rate_limit import (
    MemoryRateLimiter,
    RateDecision,
    RedisRateLimiter,
    build_rate_limiter,
    retry_after_header,
)

pytestmark = pytest.mark.unit


class FakeClock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def test_hits_beyond_the_limit_are_refused_with_the_wait_until_a_slot_frees() -> None:
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock)
    assert [limiter.hit("user:1", 3).allowed for _ in range(3)] == [True, True, True]
    clock.now += 20
    refused = limiter.hit("user:1", 3)
    assert refused == RateDecision(False, pytest.approx(40.0))
    clock.now += refused.retry_after_s
    assert limiter.hit("user:1", 3).allowed


def test_the_window_slides_instead_of_resetting_on_the_minute() -> None:
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock)
    for offset in (0, 30, 45):
        clock.now = 500.0 + offset
        assert limiter.hit("ip:10.0.0.1", 3).allowed
    clock.now = 550.0
    assert limiter.hit("ip:10.0.0.1", 3) == RateDecision(False, pytest.approx(10.0))
    clock.now = 560.001  # the hit at 500 left the window; those at 530 and 545 still count
    assert limiter.hit("ip:10.0.0.1", 3).allowed
    assert not limiter.hit("ip:10.0.0.1", 3).allowed


def test_refused_hits_do_not_extend_the_wait() -> None:
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock)
    limiter.hit("k", 1)
    for _ in range(50):
        clock.now += 1
        limiter.hit("k", 1)
    clock.now = 560.0
    assert limiter.hit("k", 1).allowed


def test_keys_are_counted_separately() -> None:
    limiter = MemoryRateLimiter(FakeClock())
    assert limiter.hit("user:alice", 1).allowed
    assert not limiter.hit("user:alice", 1).allowed
    assert limiter.hit("user:bob", 1).allowed


def test_concurrent_hits_never_exceed_the_limit() -> None:
    limiter = MemoryRateLimiter()
    allowed: list[bool] = []
    lock = threading.Lock()

    def client() -> None:
        results = [limiter.hit("shared", 100).allowed for _ in range(50)]
        with lock:
            allowed.extend(results)

    threads = [threading.Thread(target=client) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert allowed.count(True) == 100


def test_idle_keys_are_forgotten() -> None:
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock)
    for i in range(999):
        limiter.hit(f"ip:{i}", 5)
    clock.now += 61
    limiter.hit("ip:new", 5)  # the 1000th call sweeps
    assert len(limiter._hits) == 1


@pytest.mark.parametrize("limit", [0, -1])
def test_a_non_positive_limit_is_a_programming_error(limit: int) -> None:
    with pytest.raises(ValueError):
        MemoryRateLimiter().hit("k", limit)


@pytest.mark.parametrize(("wait", "header"), [(0.001, "1"), (1.0, "1"), (1.2, "2"), (59.5, "60")])
def test_retry_after_header_rounds_up_to_whole_seconds(wait: float, header: str) -> None:
    assert retry_after_header(RateDecision(False, wait)) == header


def test_factory_builds_the_configured_backend(settings: Settings) -> None:
    assert isinstance(build_rate_limiter(settings), MemoryRateLimiter)
    shared = settings.model_copy(update={"rate_limit_backend": "redis"})
    assert isinstance(build_rate_limiter(shared), RedisRateLimiter)


def test_peek_decides_like_hit_without_counting_and_reset_forgets() -> None:
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock)
    for _ in range(5):
        assert limiter.peek("auth-fail:alice", 2).allowed  # looking never uses up the budget
    assert limiter.hit("auth-fail:alice", 2).allowed
    assert limiter.hit("auth-fail:alice", 2).allowed
    assert limiter.peek("auth-fail:alice", 2) == RateDecision(False, pytest.approx(60.0))
    limiter.reset("auth-fail:alice")
    assert limiter.peek("auth-fail:alice", 2).allowed
    assert limiter.hit("auth-fail:alice", 2).allowed


def test_a_claim_lets_one_caller_through_per_hold() -> None:
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock)
    assert limiter.claim("auth-pace:alice", 2.0).allowed
    clock.now += 0.5
    assert limiter.claim("auth-pace:alice", 2.0) == RateDecision(False, pytest.approx(1.5))
    assert limiter.claim("auth-pace:bob", 2.0).allowed  # per key
    clock.now += 1.5
    assert limiter.claim("auth-pace:alice", 4.0).allowed  # free again; the new hold is longer
    clock.now += 3.9
    assert not limiter.claim("auth-pace:alice", 1.0).allowed


def test_a_remembered_key_expires_and_the_sweep_forgets_it() -> None:
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock)
    limiter.remember("auth-known:alice|10.0.0.1", 30.0)
    assert limiter.remembers("auth-known:alice|10.0.0.1")
    assert not limiter.remembers("auth-known:alice|10.0.0.2")
    clock.now += 20
    limiter.remember("auth-known:alice|10.0.0.1", 30.0)  # noting it again restarts the time
    clock.now += 20
    assert limiter.remembers("auth-known:alice|10.0.0.1")
    clock.now += 10
    assert not limiter.remembers("auth-known:alice|10.0.0.1")
    for i in range(1000):  # the 1000th hit sweeps expired marks too
        limiter.hit(f"ip:{i}", 5)
    assert "auth-known:alice|10.0.0.1" not in limiter._until
