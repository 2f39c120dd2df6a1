"""What only the Redis answer cache does, against the local Redis: shared between processes,
invalidated for all. Behaviour every backend shares is in test_answer_cache_conformance.py."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from app.errors import ProviderUnavailable
from app.storage.cache import CacheKey, RedisAnswerCache, answer_cache_key
from app.storage.redis_client import connect_redis

pytestmark = pytest.mark.integration

REDIS_TEST_URL = os.environ.get("RAG_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
ANSWER = {"answer": "Thirty days [1].", "citations": [{"marker": 1, "page": 2}], "refused": False}


def key(tenant: str = "acme", question: str = "notice period?") -> CacheKey:
    return answer_cache_key(tenant, question, k=5, corpus_version=1, config_fingerprint="cfg")


@pytest.fixture
def api_processes(redis_namespace: Any) -> tuple[RedisAnswerCache, RedisAnswerCache]:
    """Two caches with their own connections, as two API processes would have."""
    prefix = redis_namespace.prefix
    first = RedisAnswerCache(redis_namespace.client, 60, 100, prefix=prefix)
    second = RedisAnswerCache(connect_redis(REDIS_TEST_URL), 60, 100, prefix=prefix)
    return first, second


def test_an_answer_cached_by_one_process_is_served_by_another(
    api_processes: tuple[RedisAnswerCache, RedisAnswerCache],
) -> None:
    first, second = api_processes
    assert second.get(key()) is None
    first.set(key(), ANSWER)
    assert second.get(key()) == ANSWER
    assert second.get(key("globex")) is None  # same question, another tenant


def test_invalidation_by_one_process_reaches_every_process(
    api_processes: tuple[RedisAnswerCache, RedisAnswerCache], redis_namespace: Any
) -> None:
    first, second = api_processes
    first.set(key("acme"), ANSWER)
    first.set(key("acme", "another"), ANSWER)
    second.invalidate_tenant("acme")
    assert first.get(key("acme")) is None
    # The old entries are deleted, not merely unreachable.
    client, prefix = redis_namespace.client, redis_namespace.prefix
    assert list(client.scan_iter(match=f"{prefix}:cache:{{acme}}:a:*")) == []
    # Entries written after the invalidation are visible again.
    first.set(key("acme"), ANSWER)
    assert second.get(key("acme")) == ANSWER


def test_a_short_entry_does_not_shorten_the_index_of_longer_ones(
    api_processes: tuple[RedisAnswerCache, RedisAnswerCache], redis_namespace: Any
) -> None:
    first, second = api_processes
    client, prefix = redis_namespace.client, redis_namespace.prefix
    first.set(key(question="lasting"), ANSWER, ttl_s=120)
    first.set(key(question="short-lived"), ANSWER, ttl_s=1)
    index = f"{prefix}:cache:{{acme}}:index:0"
    # The index expires with its longest entry (it was cut to the last entry's 1 s before).
    assert client.pttl(index) > 60_000
    assert second.stats("acme").entries == 2


def test_unreachable_redis_degrades_lookups_but_not_invalidation() -> None:
    dead = connect_redis("redis://127.0.0.1:1/0")  # nothing listens on port 1
    cache = RedisAnswerCache(dead, ttl_s=60, max_entries=10, prefix="ragtest-dead")
    started = time.perf_counter()
    assert cache.get(key()) is None
    cache.set(key(), ANSWER)  # logged, not raised: a query still gets answered
    with pytest.raises(ProviderUnavailable):
        cache.invalidate_tenant("acme")
    print(f"three calls against a dead Redis took {time.perf_counter() - started:.3f} s")
