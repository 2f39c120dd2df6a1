"""Every setting that shapes an answer is in the cache key; the others are not."""

from __future__ import annotations

import pytest

from app.answer_shape import SETTINGS_NOT_SHAPING_ANSWERS, AnswerShape, answer_shape
from app.config import ENV_PREFIX, Settings, load_settings
from app.container import Container
from app.storage.cache import MemoryAnswerCache, answer_cache_key, config_fingerprint
from tests.storage.settings_variants import settings_with_one_change

pytestmark = pytest.mark.unit

ANSWER = {"answer": "Thirty days [1].", "citations": [{"marker": 1, "page": 2}], "refused": False}


def test_every_setting_is_either_answer_shaping_or_listed_as_not() -> None:
    shaping = set(AnswerShape.model_fields)
    assert not shaping & SETTINGS_NOT_SHAPING_ANSWERS
    unclassified = set(Settings.model_fields) - shaping - SETTINGS_NOT_SHAPING_ANSWERS
    assert not unclassified, (
        f"classify {sorted(ENV_PREFIX + n.upper() for n in unclassified)}: a field of "
        "AnswerShape if it can change an answer, else SETTINGS_NOT_SHAPING_ANSWERS"
    )
    assert shaping | SETTINGS_NOT_SHAPING_ANSWERS <= set(Settings.model_fields)


def test_the_shape_carries_the_values_of_the_settings() -> None:
    settings = load_settings(_env_file=None, llm_abstain_threshold=0.3, top_k=7)
    shape = answer_shape(settings)
    assert shape.model_dump() == {
        name: getattr(settings, name) for name in AnswerShape.model_fields
    }
    assert (shape.llm_abstain_threshold, shape.top_k) == (0.3, 7)


@pytest.mark.parametrize("name", sorted(AnswerShape.model_fields))
def test_changing_any_answer_shaping_setting_changes_the_cache_key(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = load_settings(_env_file=None)
    changed = settings_with_one_change(monkeypatch, name)
    assert config_fingerprint(changed) != config_fingerprint(base)
    assert config_fingerprint(base) == config_fingerprint(load_settings(_env_file=None))
    old, new = (
        answer_cache_key("acme", "notice period?", k=5, corpus_version=1, config_fingerprint=fp)
        for fp in (config_fingerprint(base), config_fingerprint(changed))
    )
    cache = MemoryAnswerCache(max_entries=10, ttl_s=60)
    cache.set(old, ANSWER)
    assert cache.get(new) is None  # the old configuration's answer is not served
    assert cache.get(old) == ANSWER


@pytest.mark.parametrize("name", sorted(SETTINGS_NOT_SHAPING_ANSWERS))
def test_settings_that_do_not_shape_answers_keep_cached_answers(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # RAG_JOB_BACKEND=redis is valid only with a Chroma server; neither shapes answers.
    monkeypatch.setenv(f"{ENV_PREFIX}VECTOR_BACKEND", "chroma-http")
    # RAG_METRICS_ENABLED is valid only with a token or a port of its own; none shapes answers.
    monkeypatch.setenv(f"{ENV_PREFIX}METRICS_TOKEN", "scrape-token")
    changed = settings_with_one_change(monkeypatch, name)
    assert config_fingerprint(changed) == config_fingerprint(load_settings(_env_file=None))


def test_the_service_key_follows_the_abstain_threshold(settings: Settings) -> None:
    # The bug this guards against: RAG_LLM_ABSTAIN_THRESHOLD was missing from the key.
    other = settings.model_copy(update={"llm_abstain_threshold": 0.5})
    assert Container(settings).config_fingerprint != Container(other).config_fingerprint
