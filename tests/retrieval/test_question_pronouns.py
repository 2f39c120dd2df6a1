"""The question's pronouns in BM25 (RAG_KEYWORD_PRONOUN_WEIGHT): "How
do I ..." no longer ranks first the passage that happens to hold a loop variable `i`, and a
weight between 0 and 1 still lets the pronoun break a tie. Real keyword index; the keyword arm
alone (no embedder takes part)."""

from __future__ import annotations

import pytest

from app.config import Settings
from app.retrieval.function_words import question_pronoun_weights
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


def _pages(
    settings: Settings, store: Corpus, embedder: FakeEmbedder, **update: object
) -> list[int]:
    retriever: HybridRetriever = build_retriever(
        settings.model_copy(update=update), embedder, store, None
    )
    return [hit.chunk.page for hit in retriever.search("t", QUESTION, 3, mode="keyword").hits]


def test_a_how_do_i_question_finds_its_page_not_the_loop_variable(
    settings: Settings, store: Corpus, embedder: FakeEmbedder
) -> None:
    add_document(store, embedder, "t", "manual.pdf", PAGES)
    # Scored, the pronoun matches the loop variable: "i", several times in one chunk, wins.
    assert _pages(settings, store, embedder)[0] == 1
    assert _pages(settings, store, embedder, keyword_pronoun_weight=0.0)[0] == 2
    assert _pages(settings, store, embedder, keyword_pronoun_weight=0.4)[0] == 2


# Two pages on duplicates among others that mention them; the longer one also names the option
# `-i`, which the question's "I" happens to match (nauty's manual: "-i  remove isomorphs").
TIED_PAGES = [
    "Loops: for (i in 1:10) print(i) prints the numbers; i takes each value in turn, i + 1.",
    "shortg removes duplicates.",
    "shortg -i removes duplicates from a file of graphs, comparing each pair of them again.",
    "A sorted list may hold duplicates next to each other; compare each entry with the one before.",
    "Merging two tables can bring duplicates of a row; the key column tells them apart later on.",
    "A hash of every line finds duplicates quickly, even in a long file that does not fit memory.",
    "plot(x, y) draws a scatterplot of y against x.",
    "c(1, 2, 3) makes a vector of three numbers.",
    "A graph has vertices and edges; a digraph has directed edges.",
    "The labelling of a graph is canonical when isomorphic graphs share it.",
]


def test_a_weighted_pronoun_breaks_a_tie_without_outweighing_the_question(
    settings: Settings, store: Corpus, embedder: FakeEmbedder
) -> None:
    add_document(store, embedder, "t", "graphs.pdf", TIED_PAGES)
    assert _pages(settings, store, embedder)[0] == 1  # whole weight: the loop variable
    assert _pages(settings, store, embedder, keyword_pronoun_weight=0.0)[0] == 2  # the shorter
    ranked = _pages(settings, store, embedder, keyword_pronoun_weight=0.4)
    assert ranked[:2] == [3, 2]  # the option page first, the loop page out of the head
    assert 1 not in ranked[:2]


def test_only_the_pronouns_of_a_question_with_other_words_are_weighted() -> None:
    assert question_pronoun_weights(["i", "you"], 0.0) == {}
    assert question_pronoun_weights(["how", "i", "remove", "my", "duplicates"], 1.0) == {}
    assert question_pronoun_weights(["how", "i", "remove", "my", "duplicates"], 0.4) == {
        "i": 0.4,
        "my": 0.4,
    }
