"""Embedder factory and the fake embedder: configuration errors, caching, normalisation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.config import EMBEDDING_PROVIDERS, Settings, load_settings
from app.errors import ConfigurationError
from app.providers.embeddings import build_embedder, l2_normalise
from tests.fakes import FakeEmbedder

pytestmark = pytest.mark.unit


def test_a_provider_builds_once_per_configuration(settings: Settings):
    remote = {"embedding_provider": "openai", "embedding_model": "m", "openai_api_key": "k"}
    first = build_embedder(settings.model_copy(update=remote))  # contacts nothing yet

    assert first.model_id == "openai:m"
    assert build_embedder(settings.model_copy(update=remote)) is first
    other = build_embedder(settings.model_copy(update={**remote, "embedding_model": "n"}))
    assert other is not first and other.model_id == "openai:n"


def test_the_fake_embedder_is_no_setting_but_a_container_override(settings: Settings):
    from app.container import Container
    from tests.fakes import fake_providers

    assert Container(settings, fake_providers()).embedder.model_id == "fake:hashed-bow-512"
    with pytest.raises(ConfigurationError) as refused:
        load_settings(_env_file=None, embedding_provider="fake")
    assert "RAG_EMBEDDING_PROVIDER: Input should be 'use', 'e5', 'huggingface'" in str(
        refused.value
    )


@given(st.text(max_size=200))
def test_fake_vectors_are_unit_length_for_any_text(text):
    vector = FakeEmbedder().embed_query(text)

    assert len(vector) == 512
    assert math.isclose(float(np.linalg.norm(vector)), 1.0, rel_tol=1e-5)


def test_l2_normalise_keeps_zero_rows_finite():
    out = l2_normalise([[3.0, 4.0], [0.0, 0.0]])

    assert out.tolist() == [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]


@pytest.mark.parametrize("provider", ["openai", "ollama", "huggingface"])
def test_providers_without_a_named_model_fail_naming_the_variable(settings, provider):
    configured = settings.model_copy(
        update={"embedding_provider": provider, "embedding_model": "  ", "openai_api_key": "k"}
    )

    with pytest.raises(ConfigurationError, match="RAG_EMBEDDING_MODEL"):
        build_embedder(configured)


def test_openai_without_an_api_key_fails_naming_the_variable(settings):
    configured = settings.model_copy(
        update={"embedding_provider": "openai", "embedding_model": "text-embedding-3-small"}
    )

    with pytest.raises(ConfigurationError, match="RAG_OPENAI_API_KEY"):
        build_embedder(configured)


def test_unknown_provider_is_refused_at_settings_time(data_dir):
    with pytest.raises(ConfigurationError, match="RAG_EMBEDDING_PROVIDER"):
        load_settings(_env_file=None, data_dir=data_dir, embedding_provider="word2vec")


def test_remote_providers_build_without_contacting_the_server(settings):
    openai = build_embedder(
        settings.model_copy(
            update={
                "embedding_provider": "openai",
                "embedding_model": "text-embedding-3-small",
                "openai_api_key": "sk-test",
            }
        )
    )
    ollama = build_embedder(
        settings.model_copy(
            update={
                "embedding_provider": "ollama",
                "embedding_model": "nomic-embed-text",
                "embedding_query_prefix": "search_query: ",
                "embedding_passage_prefix": "search_document: ",
            }
        )
    )

    assert openai.model_id == "openai:text-embedding-3-small"
    assert ollama.model_id.startswith("ollama:nomic-embed-text|query_prefix='search_query: '")


def test_settings_accept_exactly_the_providers_the_factory_builds(settings: Settings) -> None:
    # The factory's refusal of an unknown name lists every provider it can build.
    with pytest.raises(ConfigurationError) as refused:
        build_embedder(settings.model_copy(update={"embedding_provider": "no-such-embedder"}))
    expected = "expected one of " + ", ".join(sorted(EMBEDDING_PROVIDERS))
    assert str(refused.value).endswith(expected)
