"""BM25 without the question's pronouns (RAG_KEYWORD_SKIP_PRONOUNS): "How do I ..." no longer
ranks first the passage that happens to hold a loop variable `i`. Real keyword index; the
keyword arm alone (no embedder takes part)."""

from __future__ import annotations

import pytest

from app.config import Settings
from app.retrieval.function_words import without_question_pronouns
from app.retrieval.hybrid import HybridRetriever, build_retriever
from app.services.blocks.corpus import Corpus
from tests.fakes import FakeEmbedder
from tests.retrieval.memory_store import add_document

pytestmark = pytest.mark.integration

PAGES = [
    "Loops: for (i in 1:10) print(i) prints the numbers; i takes each value in turn, i + 1.",
    "unique(x) keeps one of each value: the duplicates of x are left out.",
    "c(1, 2, 3) makes a vector of three numbers.",
    "plot(x, y) draws a scatterplot of y against x.",
]
QUESTION = "How do I get rid of duplicates?"


def _first_page(settings: Settings, store: Corpus, embedder: FakeEmbedder, skip: bool) -> int:
    retriever: HybridRetriever = build_retriever(
        settings.model_copy(update={"keyword_skip_pronouns": skip}), embedder, store, None
    )
    hits = retriever.search("t", QUESTION, 3, mode="keyword").hits
    return hits[0].chunk.page


def test_a_how_do_i_question_finds_its_page_not_the_loop_variable(
    settings: Settings, store: Corpus, embedder: FakeEmbedder
) -> None:
    add_document(store, embedder, "t", "manual.pdf", PAGES)
    # Scored, the pronoun matches the loop variable: "i", several times in one chunk, wins.
    assert _first_page(settings, store, embedder, skip=False) == 1
    assert _first_page(settings, store, embedder, skip=True) == 2


def test_a_question_of_pronouns_only_keeps_them() -> None:
    assert without_question_pronouns(["i", "you"]) == ["i", "you"]
    assert without_question_pronouns(["how", "i", "remove", "my", "duplicates"]) == [
        "how",
        "remove",
        "duplicates",
    ]
