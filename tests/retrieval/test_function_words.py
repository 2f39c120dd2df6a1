"""Query coverage (the keyword arm's weight) counts content words only: Arabic function words
neither count as missing over English text nor as found over Arabic text."""

from __future__ import annotations

import pytest

from app.retrieval.function_words import content_tokens
from app.retrieval.hybrid import HybridRetriever
from app.services.blocks.corpus import Corpus
from tests.fakes import FakeEmbedder
from tests.retrieval.memory_store import add_document


@pytest.fixture
def bilingual(retriever: HybridRetriever, store: Corpus, embedder: FakeEmbedder) -> HybridRetriever:
    add_document(store, embedder, "en", "suez.txt", ["The Suez Canal opened in 1869."])
    add_document(store, embedder, "ar", "cairo.txt", ["القاهرة عاصمة مصر وأكبر مدنها."])
    return retriever


def test_a_number_in_an_arabic_question_over_english_text_covers_a_quarter_not_a_sixth(
    bilingual: HybridRetriever,
) -> None:
    # في and أي are function words; عام, افتتحت, القناة and 1869 remain; only 1869 is found.
    recall = bilingual.recall("en", "في أي عام افتتحت القناة 1869", "hybrid")
    assert recall.coverage == pytest.approx(1 / 4)


def test_function_words_do_not_count_as_found_over_arabic_text(
    bilingual: HybridRetriever,
) -> None:
    # ما and هي would be "found" in any Arabic text; عاصمة and مصر are the question.
    assert bilingual.recall("ar", "ما هي عاصمة مصر", "hybrid").coverage == 1.0
    assert bilingual.recall("ar", "ما هي عاصمة فرنسا", "hybrid").coverage == 0.5


def test_a_question_of_function_words_only_keeps_them(bilingual: HybridRetriever) -> None:
    tokenizer = bilingual.keyword_index.tokenizer
    tokens = tokenizer("من هو")
    assert content_tokens(tokens, tokenizer) == tokens
    assert content_tokens(tokenizer("من هو مؤسس الشركة"), tokenizer) == tokenizer("مؤسس الشركة")
