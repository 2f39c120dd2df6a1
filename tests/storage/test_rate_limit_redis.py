"""The Redis rate limiter against the local Redis: counts shared by every API process."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from app.errors import ProviderUnavailable
from app.storage.rate_limit import RedisRateLimiter
from app.storage.redis_client import connect_redis

pytestmark = pytest.mark.integration

REDIS_TEST_URL = os.environ.get("RAG_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def process(redis_namespace: Any, window_s: float = 60.0) -> RedisRateLimiter:
    """A limiter with its own connection, as a separate API process would have."""
    return RedisRateLimiter(
        connect_redis(REDIS_TEST_URL), prefix=redis_namespace.prefix, window_s=window_s
    )


def test_limit_is_shared_between_processes(redis_namespace: Any) -> None:
    first, second = process(redis_namespace), process(redis_namespace)
    assert all(first.hit("user:alice", 5).allowed for _ in range(3))
    assert all(second.hit("user:alice", 5).allowed for _ in range(2))
    refused = first.hit("user:alice", 5)
    assert not refused.allowed
    assert 59.0 < refused.retry_after_s <= 60.0
    assert second.hit("user:bob", 5).allowed


def age_hits(redis_namespace: Any, key: str, seconds: float) -> None:
    """Move every recorded hit of `key` `seconds` into the past, as if that much time passed.

    The limiter reads the Redis server's clock, which a test cannot set; shifting the stored
    timestamps is the same thing for the sliding window, without waiting or racing the clock.
    """
    client, zset = redis_namespace.client, f"{redis_namespace.prefix}:ratelimit:{key}"
    shifted = {m: s - seconds * 1_000_000 for m, s in client.zrange(zset, 0, -1, withscores=True)}
    assert shifted, f"no hits recorded under {zset}"
    client.zadd(zset, shifted)


def test_a_slot_frees_when_the_oldest_hit_leaves_the_window(redis_namespace: Any) -> None:
    limiter = process(redis_namespace)  # a 60 s window: real seconds of a busy machine do not count
    assert limiter.hit("ip:10.0.0.7", 2).allowed
    age_hits(redis_namespace, "ip:10.0.0.7", 24)
    assert limiter.hit("ip:10.0.0.7", 2).allowed
    refused = limiter.hit("ip:10.0.0.7", 2)
    # The oldest hit is 24 s old: its slot frees in 36 s (less the real time since).
    assert not refused.allowed and 30 < refused.retry_after_s <= 36, refused
    age_hits(redis_namespace, "ip:10.0.0.7", refused.retry_after_s)
    assert limiter.hit("ip:10.0.0.7", 2).allowed
    assert not limiter.hit("ip:10.0.0.7", 2).allowed  # the second hit is still in the window


def test_concurrent_hits_from_two_processes_never_exceed_the_limit(redis_namespace: Any) -> None:
    limiters = [process(redis_namespace), process(redis_namespace)]
    allowed: list[bool] = []
    lock = threading.Lock()

    def client(limiter: RedisRateLimiter) -> None:
        results = [limiter.hit("shared", 30).allowed for _ in range(20)]
        with lock:
            allowed.extend(results)

    threads = [threading.Thread(target=client, args=(limiters[i % 2],)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert allowed.count(True) == 30


def test_keys_live_under_the_prefix_and_expire(redis_namespace: Any) -> None:
    limiter = process(redis_namespace)
    limiter.hit("user:carol", 3)
    client, prefix = redis_namespace.client, redis_namespace.prefix
    keys = list(client.scan_iter(match=f"{prefix}:*"))
    assert keys == [f"{prefix}:ratelimit:user:carol".encode()]
    assert 0 < client.pttl(keys[0]) <= 60_000


def test_unreachable_redis_is_reported_not_ignored() -> None:
    limiter = RedisRateLimiter(connect_redis("redis://127.0.0.1:1/0"), prefix="ragtest-dead")
    with pytest.raises(ProviderUnavailable):
        limiter.hit("user:alice", 5)


def test_peek_does_not_count_and_reset_forgets_across_processes(redis_namespace: Any) -> None:
    first, second = process(redis_namespace), process(redis_namespace)
    for _ in range(4):
        assert first.peek("auth-fail:alice|10.0.0.9", 2).allowed
    assert first.hit("auth-fail:alice|10.0.0.9", 2).allowed
    assert second.hit("auth-fail:alice|10.0.0.9", 2).allowed
    refused = second.peek("auth-fail:alice|10.0.0.9", 2)
    assert not refused.allowed and 59.0 < refused.retry_after_s <= 60.0
    first.reset("auth-fail:alice|10.0.0.9")
    assert second.peek("auth-fail:alice|10.0.0.9", 2).allowed


def test_claims_and_remembered_keys_are_shared_and_expire(redis_namespace: Any) -> None:
    first, second = process(redis_namespace), process(redis_namespace)
    assert first.claim("auth-pace:alice", 0.5).allowed
    refused = second.claim("auth-pace:alice", 0.5)
    assert not refused.allowed and 0 < refused.retry_after_s <= 0.5
    time.sleep(refused.retry_after_s + 0.05)
    assert second.claim("auth-pace:alice", 0.5).allowed

    first.remember("auth-known:alice|10.0.0.1", 0.5)
    assert second.remembers("auth-known:alice|10.0.0.1")
    assert not second.remembers("auth-known:alice|10.0.0.2")
    client, prefix = redis_namespace.client, redis_namespace.prefix
    assert 0 < client.pttl(f"{prefix}:ratelimit:auth-known:alice|10.0.0.1") <= 500
    time.sleep(0.6)
    assert not second.remembers("auth-known:alice|10.0.0.1")
