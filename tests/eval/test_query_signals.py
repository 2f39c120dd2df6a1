"""Query-time signals under measurement: how rare the question's words are in the text (counted
by the harness, never by /search), how peaked an arm is."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.config import Settings
from app.retrieval.hybrid import Recall, build_retriever
from eval.query_signals import (
    as_counted,
    counted,
    idf,
    peakedness,
    rare_word_coverage,
    word_counts,
)
from tests.fakes import FakeEmbedder
from tests.retrieval.memory_store import add_document, memory_corpus

pytestmark = pytest.mark.unit


def test_a_rare_word_weighs_more_than_a_common_one() -> None:
    assert idf(1, 1000) > idf(100, 1000) > idf(900, 1000) >= 0


def test_holding_only_the_common_words_of_a_question_is_low_coverage() -> None:
    # Half the words occur either way; what occurs matters: "set" is in 400 of 1000 chunks,
    # "printer" in 3, "colour" in none.
    only_common = rare_word_coverage({"colour": 0, "set": 400}, 1000)
    rare_held = rare_word_coverage({"colour": 0, "printer": 3}, 1000)
    assert only_common < 0.2 < 0.4 < rare_held < 1.0
    assert rare_word_coverage({"printer": 3, "set": 400}, 1000) == 1.0
    assert rare_word_coverage({}, 1000) == 1.0


def test_a_first_score_far_above_the_rest_is_peaked_a_flat_list_is_not() -> None:
    assert peakedness([9.0, 2.0, 1.9, 1.8, 1.7]) > 1.9
    assert peakedness([0.5, 0.5, 0.5]) == 0.0
    assert peakedness([0.7]) == 0.0
    assert peakedness([3.0, 2.9, 2.8, 2.7]) < peakedness([9.0, 2.9, 2.8, 2.7])


def test_the_harness_counts_the_chunks_holding_each_content_word(
    settings: Settings, tmp_path: Path
) -> None:
    embedder = FakeEmbedder()
    corpus = memory_corpus(tmp_path, embedder)
    retriever = build_retriever(settings, embedder, corpus, reranker=None)
    add_document(
        corpus,
        embedder,
        "acme",
        "printers.txt",
        ["The printer driver sets the margins.", "Set the printer colour.", "Paper sizes."],
    )
    question = "How do I set the printer margins in purple?"
    recall = retriever.recall("acme", question, "hybrid")
    index = retriever.keyword_index
    found = counted(recall, index.snapshot("acme"), index.tokenizer, question)

    counts, total = word_counts(found)
    assert total == 3
    assert counts["printer"] == 2 and counts["margins"] == 1 and counts["purple"] == 0
    assert "the" not in counts  # function words weigh nothing
    # The arms' findings travel unchanged, and a truncated copy keeps the counts.
    assert found.keyword_ids == recall.keyword_ids and found.dense_ids == recall.dense_ids
    assert word_counts(replace(found, dense_ids=found.dense_ids[:1])) == (counts, total)


def test_a_service_recall_carries_no_word_counts() -> None:
    # /search does not count; recalls cached before the counting moved carry them as attributes.
    with pytest.raises(TypeError):
        word_counts(Recall())
    cached = Recall()
    cached.__dict__.update(term_chunks={"printer": 2}, chunk_total=3)
    assert word_counts(as_counted(cached)) == ({"printer": 2}, 3)
