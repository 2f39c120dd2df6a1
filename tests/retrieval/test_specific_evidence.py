"""Specific evidence: a number or an other-script word of the query that few chunks hold lets the
keyword arm count as much as the dense arm, whatever the query's coverage."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.retrieval.evidence import script_neutral_tokens
from app.retrieval.hybrid import HybridRetriever, Recall, RetrieverConfig, fuse
from app.services.blocks.corpus import Corpus
from app.text.tokenizer import tokenize
from tests.fakes import FakeEmbedder
from tests.retrieval.memory_store import add_document

pytestmark = pytest.mark.unit

PARAGRAPHS = [
    "Hurricane Dora struck St. Augustine in 1964 with winds of 125 mph.",
    "The 2000 census counted the city; the 2000 budget followed.",
    "In 2000 the port reopened after repairs.",
    "A museum opened in 2000 near the harbour.",
    "Apollo 11 landed on the Moon; its crew flew 11 orbits before.",
    "Apollo 8 orbited the Moon first.",
    "Gemini 11 set an altitude record.",
]


@pytest.fixture
def english(retriever: HybridRetriever, store: Corpus, embedder: FakeEmbedder) -> HybridRetriever:
    add_document(store, embedder, "acme", "history.txt", PARAGRAPHS)
    return retriever


@pytest.mark.parametrize(
    ("question", "chunks"),
    [
        # A year one paragraph holds: specific.
        ("كم كانت سرعة الرياح في إعصار عام 1964؟", 1),
        # Written in Arabic-Indic or Eastern Arabic-Indic digits, it is the same year.
        ("كم كانت سرعة الرياح في إعصار عام ١٩٦٤؟", 1),
        ("كم كانت سرعة الرياح في إعصار عام ۱۹۶۴؟", 1),
        # A year three paragraphs hold: not specific at the default limit of 2.
        ("ماذا حدث في عام 2000؟", 3),
        # apollo (2 paragraphs) and 11 (2 paragraphs) are together in one.
        ("من قاد مهمة Apollo 11؟", 1),
        # Nothing script-neutral that the text has.
        ("من قاد المهمة إلى القمر؟", 0),
        # In an English question the English words are not script-neutral; only the year is.
        ("How fast were the winds in the 1964 hurricane at St. Augustine?", 1),
        ("What happened in 2000 at the harbour museum?", 3),
    ],
)
def test_chunks_holding_all_script_neutral_tokens_are_counted(
    english: HybridRetriever, question: str, chunks: int
) -> None:
    assert english.recall("acme", question, "hybrid").specific_evidence_chunks == chunks


def test_script_neutral_tokens_are_numbers_and_words_in_another_script() -> None:
    assert script_neutral_tokens(tokenize("من قاد مهمة Apollo 11 عام 1969؟")) == [
        "apollo",
        "11",
        "1969",
    ]
    assert script_neutral_tokens(tokenize("Who led Apollo 11 in 1969?")) == ["11", "1969"]
    assert script_neutral_tokens(tokenize("1969")) == ["1969"]


def _recall(specific_chunks: int, coverage: float = 0.05) -> Recall:
    # The dense arm prefers x and puts y third; the keyword arm matched one year, held by y
    # alone, in a question of twenty words (coverage 1/20).
    recall = Recall(dense_ids=["x", "z", "y"], keyword_ids=["y"], coverage=coverage)
    recall.specific_evidence_chunks = specific_chunks
    for cid in "xyz":
        recall.candidate(cid)
    return recall


CONFIG = RetrieverConfig(rrf_k=5, dense_weight=0.3, specific_evidence_max_chunks=2)


def test_specific_evidence_lifts_the_chunk_holding_it_over_the_dense_favourite() -> None:
    assert fuse(_recall(1), "hybrid", CONFIG)[0] == "y"
    assert fuse(_recall(2), "hybrid", CONFIG)[0] == "y"


def test_evidence_many_chunks_hold_leaves_coverage_in_charge() -> None:
    assert fuse(_recall(3), "hybrid", CONFIG)[0] == "x"
    assert fuse(_recall(0), "hybrid", CONFIG)[0] == "x"


def test_the_rule_switched_off_leaves_coverage_in_charge() -> None:
    off = replace(CONFIG, specific_evidence_max_chunks=0)
    assert fuse(_recall(1), "hybrid", off)[0] == "x"


def test_the_rule_never_lowers_a_keyword_weight_coverage_already_gives() -> None:
    recall = _recall(1, coverage=1.0)
    fuse(recall, "hybrid", CONFIG)
    # Coverage 1: keyword weight 1 at rank 1, dense weight 0.3 at rank 3.
    assert recall.candidates["y"].fused_score == pytest.approx(1 / 6 + 0.3 / 8)
