"""The Redis answer cache against the local Redis: shared between processes, invalidated for all."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from app.answer_shape import AnswerShape
from app.config import load_settings
from app.errors import ProviderUnavailable
from app.storage.cache import CacheKey, RedisAnswerCache, answer_cache_key, config_fingerprint
from app.storage.redis_client import connect_redis
from tests.storage.settings_variants import settings_with_one_change

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
    first.set(key("globex"), ANSWER)
    second.invalidate_tenant("acme")
    assert first.get(key("acme")) is None
    assert first.get(key("acme", "another")) is None
    assert first.get(key("globex")) == ANSWER
    # The old entries are deleted, not merely unreachable.
    client, prefix = redis_namespace.client, redis_namespace.prefix
    assert list(client.scan_iter(match=f"{prefix}:cache:{{acme}}:a:*")) == []
    # Entries written after the invalidation are visible again.
    first.set(key("acme"), ANSWER)
    assert second.get(key("acme")) == ANSWER


def test_entries_expire_after_their_ttl(
    api_processes: tuple[RedisAnswerCache, RedisAnswerCache], redis_namespace: Any
) -> None:
    first, second = api_processes
    client, prefix = redis_namespace.client, redis_namespace.prefix
    lasting, short = key(question="lasting"), key(question="short-lived")
    first.set(short, ANSWER, ttl_s=1)
    first.set(lasting, ANSWER)
    entry = f"{prefix}:cache:{{acme}}:a:0:{short.digest}"
    assert client.pttl(entry) <= 1000  # the per-call TTL reached Redis (-2 once already gone)
    # Wait for Redis to expire it (no fixed sleep that a busy machine could outlast).
    deadline = time.monotonic() + 30
    while client.exists(entry):
        assert time.monotonic() < deadline, "Redis never expired the entry"
        time.sleep(0.05)
    assert second.get(short) is None
    assert second.get(lasting) == ANSWER
    assert second.stats("acme").entries == 1


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


def test_stats_are_shared_and_per_tenant(
    api_processes: tuple[RedisAnswerCache, RedisAnswerCache],
) -> None:
    first, second = api_processes
    first.get(key())
    first.set(key(), ANSWER)
    second.get(key())
    second.get(key())
    stats = first.stats("acme")
    assert (stats.entries, stats.hits, stats.misses) == (1, 2, 1)
    assert first.stats("globex").entries == 0


def test_each_tenant_is_bounded_to_max_entries(redis_namespace: Any) -> None:
    cache = RedisAnswerCache(
        redis_namespace.client, ttl_s=60, max_entries=3, prefix=redis_namespace.prefix
    )
    for i in range(5):
        cache.set(key(question=f"q{i}"), {"i": i})
    assert cache.stats("acme").entries == 3
    assert cache.get(key(question="q0")) is None
    assert cache.get(key(question="q4")) == {"i": 4}


def test_unreachable_redis_degrades_lookups_but_not_invalidation() -> None:
    dead = connect_redis("redis://127.0.0.1:1/0")  # nothing listens on port 1
    cache = RedisAnswerCache(dead, ttl_s=60, max_entries=10, prefix="ragtest-dead")
    started = time.perf_counter()
    assert cache.get(key()) is None
    cache.set(key(), ANSWER)  # logged, not raised: a query still gets answered
    with pytest.raises(ProviderUnavailable):
        cache.invalidate_tenant("acme")
    print(f"three calls against a dead Redis took {time.perf_counter() - started:.3f} s")


@pytest.mark.parametrize("name", sorted(AnswerShape.model_fields))
def test_an_answer_cached_under_one_configuration_is_not_served_under_another(
    name: str,
    api_processes: tuple[RedisAnswerCache, RedisAnswerCache],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, second = api_processes
    before = config_fingerprint(load_settings(_env_file=None))
    after = config_fingerprint(settings_with_one_change(monkeypatch, name))

    def shaped(fingerprint: str) -> CacheKey:
        return answer_cache_key(
            "acme", "notice period?", k=5, corpus_version=1, config_fingerprint=fingerprint
        )

    first.set(shaped(before), ANSWER)
    assert second.get(shaped(after)) is None
    assert second.get(shaped(before)) == ANSWER
