"""The USE question centring against real Chroma and the real shipped model.

With RAG_USE_QUESTION_CENTRING=true (opt-in: it gains on Wikipedia-like text and loses on hadith
and Qur'an, docs/evaluation.md) the service subtracts 0.75 x the mean question vector from every
question it embeds (app/providers/use_question_mean.py). A paragraph made of questions shares
that component with every question, so without the centring it can outrank the paragraph that
answers; passages are embedded the same either way, so switching needs no reindex.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.config import Settings, load_settings
from app.providers.embeddings import build_embedder, use_embedder
from app.providers.types import Embedder
from app.retrieval.hybrid import build_retriever
from testkit.indexing import build_corpus
from tests.retrieval.memory_store import add_document

pytestmark = pytest.mark.integration

ANSWERS = [
    "Visitor information. The museum opens at nine in the morning and closes at five in the "
    "afternoon; entry is free on Sundays.",
    "Photosynthesis turns sunlight, water and carbon dioxide into sugar and oxygen inside plant "
    "cells.",
]
QUESTION_LISTS = [
    "Frequently asked questions: What can I see? Who can visit? When is it open? Where is it? "
    "How much does it cost? Why come?",
    "What is photosynthesis? Why is it important? How do plants do it? These questions are "
    "answered in chapter two.",
]


@pytest.fixture(scope="module")
def service_embedder() -> Embedder:
    return build_embedder(
        load_settings(_env_file=None, embedding_provider="use", use_question_centring=True)
    )


@pytest.fixture(scope="module")
def uncentred() -> Embedder:
    """USE's own question vectors: what the service embedded questions with before."""
    return use_embedder(threads=1, batch_size=32, centre_questions=False)


@pytest.fixture
def use_settings(data_dir: Path) -> Settings:
    return load_settings(_env_file=None, data_dir=data_dir, embedding_provider="use")


@pytest.mark.parametrize(
    ("question", "answer", "question_list"),
    [
        # Arabic over English: "What turns sunlight into sugar?"
        ("ما الذي يحول ضوء الشمس إلى سكر؟", ANSWERS[1], QUESTION_LISTS[1]),
        ("When does the museum open?", ANSWERS[0], QUESTION_LISTS[0]),
    ],
)
def test_a_paragraph_of_questions_no_longer_outranks_the_answer(
    use_settings: Settings,
    service_embedder: Embedder,
    uncentred: Embedder,
    question: str,
    answer: str,
    question_list: str,
) -> None:
    corpus = build_corpus(use_settings, service_embedder)
    add_document(corpus, service_embedder, "acme", "visitors.txt", ANSWERS + QUESTION_LISTS)
    before = build_retriever(use_settings, uncentred, corpus, None)
    after = build_retriever(use_settings, service_embedder, corpus, None)

    assert before.search("acme", question, 3, "dense").hits[0].chunk.text == question_list
    assert after.search("acme", question, 3, "dense").hits[0].chunk.text == answer
    assert after.search("acme", question, 3, "hybrid").hits[0].chunk.text == answer


def test_tenants_indexed_before_the_centring_are_searched_without_a_reindex(
    use_settings: Settings, service_embedder: Embedder, uncentred: Embedder
) -> None:
    # Passages are embedded exactly as before, under the same model id: the stored vectors
    # stay valid, so no "vectors of another model" refusal and no rebuild.
    texts = ANSWERS + QUESTION_LISTS
    assert service_embedder.model_id == uncentred.model_id
    assert np.array_equal(service_embedder.embed_documents(texts), uncentred.embed_documents(texts))
    add_document(build_corpus(use_settings, uncentred), uncentred, "acme", "v.txt", ANSWERS)

    corpus = build_corpus(use_settings, service_embedder)
    hits = corpus.query(
        tenant_id="acme", vector=service_embedder.embed_query("When is the museum open?"), k=2
    )

    assert corpus.count("acme") == len(ANSWERS)
    assert hits[0][0].text == ANSWERS[0]
    assert corpus.reindex("acme") == 0  # nothing to rebuild


def test_only_questions_are_centred_and_stay_unit_length(
    service_embedder: Embedder, uncentred: Embedder
) -> None:
    question = "ما هي ساعات عمل المتحف؟"
    centred = np.asarray(service_embedder.embed_query(question))
    own = np.asarray(uncentred.embed_query(question))

    assert np.isclose(np.linalg.norm(centred), 1.0, atol=1e-5)
    assert float(centred @ own) < 0.99  # moved ...
    assert float(centred @ own) > 0.8  # ... but still the same question


def test_questions_are_not_centred_unless_asked(uncentred: Embedder) -> None:
    default = build_embedder(load_settings(_env_file=None, embedding_provider="use"))
    question = "When does the museum open?"
    assert default.embed_query(question) == uncentred.embed_query(question)
