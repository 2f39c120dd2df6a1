"""What only the Redis rate limiter does, against the local Redis: counts, claims and remembered
keys shared by every API process. Behaviour every backend shares is in
test_rate_limit_conformance.py."""

from __future__ import annotations

import os
import threading
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


def test_claims_and_remembered_keys_are_shared_between_processes(redis_namespace: Any) -> None:
    first, second = process(redis_namespace), process(redis_namespace)
    assert first.claim("auth-pace:alice", 30).allowed
    refused = second.claim("auth-pace:alice", 30)
    assert not refused.allowed and 0 < refused.retry_after_s <= 30
    first.remember("auth-known:alice|10.0.0.1", 30)
    assert second.remembers("auth-known:alice|10.0.0.1")
    assert first.hit("auth-fail:alice", 1).allowed
    first.reset("auth-fail:alice")
    assert second.hit("auth-fail:alice", 1).allowed  # the reset reached every process
