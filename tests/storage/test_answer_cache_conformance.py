"""One behaviour suite for every answer cache backend.

Each backend in `BACKENDS` builds a cache and says how time passes for it: the memory cache
runs on a fake clock, Redis on its own server clock, so there the test waits. A new backend is
added by adding it to `BACKENDS`; what only one backend does (sharing between processes, an
unreachable Redis, LRU order, thread safety of the memory cache) is tested in its own file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from app.answer_shape import AnswerShape
from app.config import load_settings
from app.storage.cache import (
    AnswerCache,
    CacheKey,
    MemoryAnswerCache,
    RedisAnswerCache,
    answer_cache_key,
    config_fingerprint,
)
from tests.fake_clock import FakeClock
from tests.storage.settings_variants import settings_with_one_change

ANSWER = {"answer": "Thirty days [1].", "citations": [{"marker": 1, "page": 2}], "refused": False}


@dataclass
class CacheUnderTest:
    cache: AnswerCache
    pass_time: Callable[[float], None]  # let this many seconds go by for the backend


def memory_backend(request: pytest.FixtureRequest, max_entries: int, ttl_s: int) -> CacheUnderTest:
    clock = FakeClock()
    return CacheUnderTest(MemoryAnswerCache(max_entries, ttl_s, clock=clock), clock.advance)


def redis_backend(request: pytest.FixtureRequest, max_entries: int, ttl_s: int) -> CacheUnderTest:
    namespace = request.getfixturevalue("redis_namespace")
    cache = RedisAnswerCache(namespace.client, ttl_s, max_entries, prefix=namespace.prefix)
    # Redis expires keys on its own clock, which a test cannot move; a read after the TTL
    # never returns the entry, so waiting past it is enough.
    return CacheUnderTest(cache, lambda seconds: time.sleep(seconds + 0.05))


Backend = Callable[[pytest.FixtureRequest, int, int], CacheUnderTest]
BACKENDS = [
    pytest.param(memory_backend, id="memory", marks=pytest.mark.unit),
    pytest.param(redis_backend, id="redis", marks=pytest.mark.integration),
]


@pytest.fixture(params=BACKENDS)
def make_cache(request: pytest.FixtureRequest) -> Callable[..., CacheUnderTest]:
    backend: Backend = request.param

    def make(max_entries: int = 100, ttl_s: int = 60) -> CacheUnderTest:
        return backend(request, max_entries, ttl_s)

    return make


def key(
    tenant: str = "acme", question: str = "notice period?", fingerprint: str = "cfg"
) -> CacheKey:
    return answer_cache_key(tenant, question, k=5, corpus_version=1, config_fingerprint=fingerprint)


def test_a_cached_answer_is_served_to_its_tenant_only(make_cache: Any) -> None:
    cache = make_cache().cache
    assert cache.get(key()) is None
    cache.set(key(), ANSWER)
    assert cache.get(key()) == ANSWER
    assert cache.get(key("globex")) is None  # same question, another tenant


def test_invalidating_a_tenant_drops_its_entries_and_keeps_other_tenants(make_cache: Any) -> None:
    cache = make_cache().cache
    cache.set(key("acme"), ANSWER)
    cache.set(key("acme", "another"), ANSWER)
    cache.set(key("globex"), ANSWER)
    cache.invalidate_tenant("acme")
    assert cache.get(key("acme")) is None
    assert cache.get(key("acme", "another")) is None
    assert cache.get(key("globex")) == ANSWER
    assert (cache.stats("acme").entries, cache.stats("globex").entries) == (0, 1)
    cache.set(key("acme"), ANSWER)  # entries written afterwards are served again
    assert cache.get(key("acme")) == ANSWER


def test_hits_and_misses_are_counted_per_tenant(make_cache: Any) -> None:
    cache = make_cache().cache
    cache.get(key())
    cache.set(key(), ANSWER)
    cache.get(key())
    cache.get(key())
    stats = cache.stats("acme")
    assert (stats.entries, stats.hits, stats.misses) == (1, 2, 1)
    assert stats.hit_rate == pytest.approx(2 / 3)
    assert cache.stats("globex").entries == 0
    assert cache.stats("globex").hit_rate == 0.0


def test_beyond_max_entries_the_oldest_entry_goes(make_cache: Any) -> None:
    cache = make_cache(max_entries=3).cache
    for i in range(5):
        cache.set(key(question=f"q{i}"), {"i": i})
    assert cache.stats("acme").entries == 3
    assert cache.get(key(question="q0")) is None
    assert cache.get(key(question="q4")) == {"i": 4}


def test_entries_expire_after_their_own_or_the_default_ttl(make_cache: Any) -> None:
    under_test = make_cache(ttl_s=2)
    cache = under_test.cache
    cache.set(key(question="default"), ANSWER)
    cache.set(key(question="short-lived"), ANSWER, ttl_s=1)
    under_test.pass_time(1)
    assert cache.get(key(question="short-lived")) is None
    assert cache.get(key(question="default")) == ANSWER
    under_test.pass_time(1)
    assert cache.get(key(question="default")) is None


def test_a_caller_changing_its_copy_does_not_change_the_cached_answer(make_cache: Any) -> None:
    cache = make_cache().cache
    cache.set(key(), ANSWER)
    first = cache.get(key())
    assert first is not None
    first["answer"] = "tampered"
    assert cache.get(key()) == ANSWER


def test_values_that_are_not_json_are_refused_when_set(make_cache: Any) -> None:
    cache = make_cache().cache
    with pytest.raises(TypeError):
        cache.set(key(), {"answer": object()})
    assert cache.get(key()) is None


@pytest.mark.parametrize("name", sorted(AnswerShape.model_fields))
def test_an_answer_cached_under_one_configuration_is_not_served_under_another(
    name: str, make_cache: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = make_cache().cache
    before = config_fingerprint(load_settings(_env_file=None))
    after = config_fingerprint(settings_with_one_change(monkeypatch, name))
    cache.set(key(fingerprint=before), ANSWER)
    assert cache.get(key(fingerprint=after)) is None
    assert cache.get(key(fingerprint=before)) == ANSWER
