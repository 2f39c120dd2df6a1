"""The provider registries: built once with a builder for exactly the names the setting's
`Literal` accepts, unchangeable afterwards, and an unknown name refused naming the choices."""

from __future__ import annotations

import pytest

from app.config import EMBEDDING_PROVIDERS, LLM_PROVIDERS, Settings, load_settings
from app.errors import ConfigurationError
from app.providers import embeddings, llms
from app.providers.embeddings import build_embedder
from app.providers.llms import build_llm
from app.providers.registry import ProviderRegistry

pytestmark = pytest.mark.unit


def test_a_registry_must_build_exactly_the_names_the_setting_accepts() -> None:
    with pytest.raises(ValueError, match="RAG_THING: builders for \\['a'\\], settings accept"):
        ProviderRegistry[object]("RAG_THING", frozenset({"a", "b"}), {"a": lambda: "built a"})
    with pytest.raises(ValueError, match="RAG_THING"):
        ProviderRegistry[object]("RAG_THING", frozenset({"a"}), {"a": print, "fake": print})


def test_the_service_registries_cannot_be_changed() -> None:
    for registry, accepted in (
        (embeddings._REGISTRY, EMBEDDING_PROVIDERS),
        (llms._REGISTRY, LLM_PROVIDERS),
    ):
        assert set(registry.names()) == accepted
        with pytest.raises(TypeError):
            registry._builders["fake"] = print  # type: ignore[index]
        assert not hasattr(registry, "extended")
    with pytest.raises(AttributeError):
        EMBEDDING_PROVIDERS.add("fake")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("field", "variable", "choices"),
    [
        ("llm_provider", "RAG_LLM_PROVIDER", "'llamacpp', 'ollama', 'openai' or 'extractive'"),
        (
            "embedding_provider",
            "RAG_EMBEDDING_PROVIDER",
            "'use', 'e5', 'huggingface', 'openai' or 'ollama'",
        ),
    ],
    ids=["llm", "embedding"],
)
def test_settings_refuse_an_unknown_provider_naming_the_variable_and_the_choices(
    field: str, variable: str, choices: str
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        load_settings(_env_file=None, **{field: "fake"})
    assert f"{variable}: Input should be {choices} (got 'fake')" in refused.value.message


def test_a_factory_refuses_an_unknown_provider_naming_the_setting_and_the_choices(
    settings: Settings,
) -> None:
    # Settings validation refuses it first; a copy skips validation, as a stale object would.
    with pytest.raises(ConfigurationError) as llm:
        build_llm(settings.model_copy(update={"llm_provider": "gpt-9"}))
    assert llm.value.message == (
        "RAG_LLM_PROVIDER: unknown provider 'gpt-9'; "
        "expected one of extractive, llamacpp, ollama, openai"
    )
    with pytest.raises(ConfigurationError) as embedder:
        build_embedder(settings.model_copy(update={"embedding_provider": "word2vec"}))
    assert embedder.value.message == (
        "RAG_EMBEDDING_PROVIDER: unknown provider 'word2vec'; "
        "expected one of e5, huggingface, ollama, openai, use"
    )
