"""The corpus's own terms for a question worded otherwise (eval/corpus_terms.py), read from a
real keyword index over a small tenant."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.config import Settings
from app.retrieval.hybrid import build_retriever
from eval.corpus_terms import (
    CooccurrenceBridge,
    CorpusWords,
    UnitBridge,
    sentence_terms,
    sentences_of,
)
from tests.fakes import FakeEmbedder
from tests.retrieval.memory_store import add_document, memory_corpus

pytestmark = pytest.mark.unit

# Sixty chunks: three say the jargon (`sink`) beside the everyday word ("divert"), the rest are
# about other things, so a word three chunks hold is rare (at most 5% of the chunks).
TEXTS = [
    "Use sink to divert the console output into a file.",
    "The sink function will divert printed results elsewhere.",
    "Call sink again to divert nothing and restore the console.",
    *[f"Topic {i} explains plotting number {i} with colours and axes." for i in range(57)],
]


@pytest.fixture
def words(settings: Settings, tmp_path: Path) -> CorpusWords:
    embedder = FakeEmbedder()
    corpus = memory_corpus(tmp_path, embedder)
    retriever = build_retriever(settings, embedder, corpus, reranker=None)
    add_document(corpus, embedder, "acme", "manual.txt", TEXTS)
    index = retriever.keyword_index
    return CorpusWords(index.snapshot("acme"), index.tokenizer)


def test_a_word_most_chunks_hold_is_never_a_term(words: CorpusWords) -> None:
    assert words.idf("sink") > 0
    assert words.idf("plotting") == 0.0  # 57 of 60 chunks
    assert words.idf("absent") == 0.0


def test_the_jargon_beside_a_questions_rare_word_is_offered(words: CorpusWords) -> None:
    bridge = CooccurrenceBridge.build(words)
    terms = bridge.terms(words.tokenizer("How do I divert what R prints?"), 3)
    assert terms[0] == "sink"
    assert "divert" not in terms  # the question's own word is no bridge
    assert bridge.terms(words.tokenizer("plotting axes"), 3) == []  # nothing rare to bridge from


def test_the_nearest_sentence_gives_its_rare_words_and_a_far_one_gives_none(
    words: CorpusWords,
) -> None:
    sentences = ["Use sink to divert the console output.", "Topic 3 explains plotting number 3."]
    vectors = np.eye(2, dtype=np.float32)
    bridge = UnitBridge(vectors, sentence_terms(sentences, words))
    near_first = [0.9, 0.1]
    terms = bridge.terms(near_first, set(words.tokenizer("divert output")), units=1, count=5)
    assert "sink" in terms
    assert "divert" not in terms
    assert "plotting" not in terms
    assert bridge.terms([0.1, 0.9], set(), units=1, count=5) == []  # its words are everywhere


def test_a_sentence_is_cut_from_the_chunk_text_once_and_short_ones_are_left_out(
    settings: Settings, tmp_path: Path
) -> None:
    embedder = FakeEmbedder()
    corpus = memory_corpus(tmp_path, embedder)
    chunks = add_document(
        corpus,
        embedder,
        "acme",
        "manual.txt",
        ["Use sink to divert output. See also.", "Use sink to divert output. Then  close\nit now."],
    )
    assert sentences_of(chunks) == ["Use sink to divert output.", "Then close it now."]
