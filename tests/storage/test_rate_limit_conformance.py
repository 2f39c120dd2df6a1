"""One behaviour suite for every rate limiter backend.

Each backend in `BACKENDS` builds a limiter and says how time passes for it. The memory limiter
runs on a fake clock. Redis keeps its own clock, which a test cannot move: its sliding window is
aged by moving the recorded hits into the past, and its holds (claims, remembered keys) are
waited out. A new backend is added by adding it to `BACKENDS`; what only one backend does is
tested in its own file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from app.storage.rate_limit import MemoryRateLimiter, RateDecision, RateLimiter, RedisRateLimiter
from tests.fake_clock import FakeClock


@dataclass
class LimiterUnderTest:
    limiter: RateLimiter
    age_hits: Callable[[str, float], None]  # the key's recorded hits become this much older
    wait: Callable[[float], None]  # this many seconds go by for claims and remembered keys


def memory_backend(request: pytest.FixtureRequest) -> LimiterUnderTest:
    clock = FakeClock(500.0)
    return LimiterUnderTest(
        MemoryRateLimiter(clock), lambda _key, seconds: clock.advance(seconds), clock.advance
    )


def redis_backend(request: pytest.FixtureRequest) -> LimiterUnderTest:
    namespace = request.getfixturevalue("redis_namespace")
    client, prefix = namespace.client, namespace.prefix

    def age_hits(key: str, seconds: float) -> None:
        zset = f"{prefix}:ratelimit:{key}"
        hits = client.zrange(zset, 0, -1, withscores=True)
        assert hits, f"no hits recorded under {zset}"
        client.zadd(zset, {member: score - seconds * 1_000_000 for member, score in hits})

    def wait(seconds: float) -> None:
        time.sleep(seconds + 0.05)

    return LimiterUnderTest(RedisRateLimiter(client, prefix=prefix), age_hits, wait)


BACKENDS = [
    pytest.param(memory_backend, id="memory", marks=pytest.mark.unit),
    pytest.param(redis_backend, id="redis", marks=pytest.mark.integration),
]
# Real time passes on the Redis server between a decision and the test's arithmetic.
SLACK_S = 1.0


@pytest.fixture(params=BACKENDS)
def under_test(request: pytest.FixtureRequest) -> LimiterUnderTest:
    backend: Callable[[pytest.FixtureRequest], LimiterUnderTest] = request.param
    return backend(request)


def test_hits_beyond_the_limit_are_refused_until_a_slot_frees(under_test: Any) -> None:
    limiter = under_test.limiter
    assert [limiter.hit("user:1", 3).allowed for _ in range(3)] == [True, True, True]
    under_test.age_hits("user:1", 20)
    refused = limiter.hit("user:1", 3)
    assert not refused.allowed
    assert refused.retry_after_s == pytest.approx(40.0, abs=SLACK_S)
    under_test.age_hits("user:1", refused.retry_after_s)
    assert limiter.hit("user:1", 3).allowed


def test_the_window_slides_instead_of_resetting_on_the_minute(under_test: Any) -> None:
    limiter = under_test.limiter
    assert limiter.hit("ip:10.0.0.1", 3).allowed
    under_test.age_hits("ip:10.0.0.1", 30)
    assert limiter.hit("ip:10.0.0.1", 3).allowed
    under_test.age_hits("ip:10.0.0.1", 15)
    assert limiter.hit("ip:10.0.0.1", 3).allowed
    under_test.age_hits("ip:10.0.0.1", 5)
    refused = limiter.hit("ip:10.0.0.1", 3)  # hits 50, 20 and 5 s old
    assert not refused.allowed
    assert refused.retry_after_s == pytest.approx(10.0, abs=SLACK_S)
    under_test.age_hits("ip:10.0.0.1", 10.001)  # the oldest left; the other two still count
    assert limiter.hit("ip:10.0.0.1", 3).allowed
    assert not limiter.hit("ip:10.0.0.1", 3).allowed


def test_refused_hits_do_not_extend_the_wait(under_test: Any) -> None:
    limiter = under_test.limiter
    assert limiter.hit("k", 1).allowed
    for _ in range(50):
        under_test.age_hits("k", 1)
        assert not limiter.hit("k", 1).allowed
    under_test.age_hits("k", 10 + SLACK_S)
    assert limiter.hit("k", 1).allowed


def test_keys_are_counted_separately(under_test: Any) -> None:
    limiter = under_test.limiter
    assert limiter.hit("user:alice", 1).allowed
    assert not limiter.hit("user:alice", 1).allowed
    assert limiter.hit("user:bob", 1).allowed


def test_concurrent_hits_never_exceed_the_limit(under_test: Any) -> None:
    limiter = under_test.limiter
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


@pytest.mark.parametrize("limit", [0, -1])
def test_a_non_positive_limit_is_a_programming_error(under_test: Any, limit: int) -> None:
    with pytest.raises(ValueError):
        under_test.limiter.hit("k", limit)


def test_peek_decides_like_hit_without_counting_and_reset_forgets(under_test: Any) -> None:
    limiter = under_test.limiter
    for _ in range(5):
        assert limiter.peek("auth-fail:alice", 2).allowed  # looking never uses up the budget
    assert limiter.hit("auth-fail:alice", 2).allowed
    assert limiter.hit("auth-fail:alice", 2).allowed
    refused = limiter.peek("auth-fail:alice", 2)
    assert refused == RateDecision(False, pytest.approx(60.0, abs=SLACK_S))
    limiter.reset("auth-fail:alice")
    assert limiter.peek("auth-fail:alice", 2).allowed
    assert limiter.hit("auth-fail:alice", 2).allowed


def test_a_claim_lets_one_caller_through_per_hold(under_test: Any) -> None:
    limiter = under_test.limiter
    assert limiter.claim("auth-pace:alice", 1.0).allowed
    refused = limiter.claim("auth-pace:alice", 1.0)
    assert not refused.allowed and 0 < refused.retry_after_s <= 1.0
    assert limiter.claim("auth-pace:bob", 1.0).allowed  # per key
    under_test.wait(refused.retry_after_s)
    assert limiter.claim("auth-pace:alice", 3.0).allowed  # free again; the new hold is longer
    under_test.wait(1.0)
    assert not limiter.claim("auth-pace:alice", 1.0).allowed


def test_a_remembered_key_expires_unless_noted_again(under_test: Any) -> None:
    limiter = under_test.limiter
    limiter.remember("auth-known:alice|10.0.0.1", 2.0)
    assert limiter.remembers("auth-known:alice|10.0.0.1")
    assert not limiter.remembers("auth-known:alice|10.0.0.2")
    under_test.wait(1.2)
    limiter.remember("auth-known:alice|10.0.0.1", 2.0)  # noting it again restarts the time
    under_test.wait(1.2)
    assert limiter.remembers("auth-known:alice|10.0.0.1")
    under_test.wait(1.0)
    assert not limiter.remembers("auth-known:alice|10.0.0.1")


def test_a_count_runs_for_its_period_from_the_first_count_then_starts_over(
    under_test: Any,
) -> None:
    limiter = under_test.limiter
    assert limiter.tally("auth-day:acme/alice") == (0, 0.0)
    assert [limiter.count_up("auth-day:acme/alice", 2.0) for _ in range(3)] == [1, 2, 3]
    assert limiter.count_up("auth-day:acme/bob", 2.0) == 1  # per key
    count, ends_in_s = limiter.tally("auth-day:acme/alice")
    assert count == 3 and 0 < ends_in_s <= 2.0
    under_test.wait(1.2)
    # A later count does not push the period's end back: it ends 2 s after the first.
    assert limiter.count_up("auth-day:acme/alice", 2.0) == 4
    assert limiter.tally("auth-day:acme/alice").ends_in_s <= 0.8 + SLACK_S / 10
    under_test.wait(0.8)
    assert limiter.tally("auth-day:acme/alice") == (0, 0.0)
    assert limiter.count_up("auth-day:acme/alice", 2.0) == 1
