"""The provider registry: a registered name is buildable and accepted by Settings; an unknown
name is refused naming the choices."""

from __future__ import annotations

import pytest

from app.config import Settings
from app.errors import ConfigurationError
from app.providers.embeddings import build_embedder
from app.providers.llms import build_llm
from app.providers.registry import ProviderRegistry

pytestmark = pytest.mark.unit


def test_a_provider_added_for_a_block_is_built_and_accepted_there_only() -> None:
    accepted = {"a"}
    registry = ProviderRegistry[object]("RAG_THING", accepted, {"a": lambda: "built a"})
    with registry.extended("b", lambda: "built b"):
        assert registry.names() == ["a", "b"] and accepted == {"a", "b"}
        assert registry.builder("b")() == "built b"
    assert registry.names() == ["a"] and accepted == {"a"}
    with pytest.raises(ConfigurationError):
        registry.builder("b")
    with pytest.raises(ValueError), registry.extended("a", lambda: "another a"):
        pass  # a production provider cannot be replaced
    assert registry.builder("a")() == "built a"


def test_an_unknown_provider_is_refused_naming_the_setting_and_the_choices(
    settings: Settings,
) -> None:
    # Settings validation refuses it first; a copy skips validation, as a stale object would.
    with pytest.raises(ConfigurationError) as llm:
        build_llm(settings.model_copy(update={"llm_provider": "gpt-9"}))
    assert llm.value.message == (
        "RAG_LLM_PROVIDER: unknown provider 'gpt-9'; "
        "expected one of extractive, fake, llamacpp, ollama, openai"
    )
    with pytest.raises(ConfigurationError) as embedder:
        build_embedder(settings.model_copy(update={"embedding_provider": "word2vec"}))
    assert embedder.value.message == (
        "RAG_EMBEDDING_PROVIDER: unknown provider 'word2vec'; "
        "expected one of e5, fake, huggingface, ollama, openai, use"
    )
