"""The answer cache key, and what only the in-memory backend does: LRU order, thread safety.

Behaviour every backend shares is in test_answer_cache_conformance.py."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.config import Settings, load_settings
from app.storage.cache import (
    CacheKey,
    MemoryAnswerCache,
    RedisAnswerCache,
    answer_cache_key,
    build_cache,
    config_fingerprint,
    normalise_question,
)

pytestmark = pytest.mark.unit

ANSWER = {"answer": "42 [1]", "citations": [{"marker": 1, "page": 3}], "refused": False}


def key(
    tenant: str = "acme", question: str = "What is the notice period?", **kw: object
) -> CacheKey:
    args: dict[str, object] = {"k": 5, "corpus_version": 1, "config_fingerprint": "cfg", **kw}
    return answer_cache_key(tenant, question, **args)  # type: ignore[arg-type]


# --- the key ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "original"),
    [
        ("  What   is\tthe notice\nperiod? ", "what is the notice period?"),
        ("WHAT IS THE NOTICE PERIOD?", "what is the notice period?"),
        ("Caf\u0065\u0301 opening hours", "Caf\u00e9 opening hours"),  # decomposed vs composed
        ("STRASSE", "straße"),
    ],
)
def test_questions_that_differ_only_in_form_share_a_key(variant: str, original: str) -> None:
    assert normalise_question(variant) == normalise_question(original)
    assert key(question=variant) == key(question=original)


def test_two_tenants_asking_the_same_question_never_share_an_entry() -> None:
    acme, globex = key("acme"), key("globex")
    assert acme.tenant_id == "acme" and globex.tenant_id == "globex"
    assert acme.digest != globex.digest
    cache = MemoryAnswerCache(max_entries=10, ttl_s=60)
    cache.set(acme, ANSWER)
    assert cache.get(globex) is None
    assert cache.get(acme) == ANSWER


@pytest.mark.parametrize(
    "change", [{"corpus_version": 2}, {"k": 6}, {"config_fingerprint": "other"}]
)
def test_corpus_version_k_and_configuration_are_part_of_the_key(change: dict[str, object]) -> None:
    assert key(**change) != key()


def test_fingerprint_follows_answer_shaping_settings_only() -> None:
    base = load_settings(_env_file=None)
    assert config_fingerprint(base) == config_fingerprint(load_settings(_env_file=None))
    assert config_fingerprint(base) != config_fingerprint(
        load_settings(_env_file=None, llm_model="another-model")
    )
    assert config_fingerprint(base) != config_fingerprint(load_settings(_env_file=None, top_k=3))
    assert config_fingerprint(base) == config_fingerprint(load_settings(_env_file=None, port=9000))


@given(st.text(max_size=200))
def test_normalisation_is_idempotent_and_ignores_surrounding_whitespace(question: str) -> None:
    once = normalise_question(question)
    assert normalise_question(once) == once
    assert normalise_question(f" \t{question}\n ") == once
    assert "  " not in once


# --- the in-memory backend ----------------------------------------------------------------------


def test_least_recently_used_entry_is_evicted_beyond_the_bound() -> None:
    cache = MemoryAnswerCache(max_entries=3, ttl_s=60)
    a, b, c, d = (key(question=q) for q in "abcd")
    for entry in (a, b, c):
        cache.set(entry, {"q": str(entry)})
    assert cache.get(a) is not None  # a is now the most recently used
    cache.set(d, ANSWER)
    assert len(cache) == 3
    assert cache.get(b) is None
    assert all(cache.get(entry) is not None for entry in (a, c, d))


def test_concurrent_use_keeps_the_bound_and_loses_nothing_recent() -> None:
    cache = MemoryAnswerCache(max_entries=50, ttl_s=60)
    errors: list[BaseException] = []

    def worker(tenant: str) -> None:
        try:
            for i in range(300):
                cache.set(key(tenant, f"q{i}"), {"i": i})
                assert cache.get(key(tenant, f"q{i}")) is not None or len(cache) <= 50
                if i % 100 == 0:
                    cache.invalidate_tenant(tenant)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(f"t{n}",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(cache) <= 50
    assert sum(cache.stats(f"t{n}").entries for n in range(6)) == len(cache)


def test_factory_builds_the_configured_backend(settings: Settings) -> None:
    memory = build_cache(settings)
    assert isinstance(memory, MemoryAnswerCache)
    redis_backed = build_cache(settings.model_copy(update={"cache_backend": "redis"}))
    assert isinstance(redis_backed, RedisAnswerCache)
