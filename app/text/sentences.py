"""Sentences of a passage, and the ones that share the most rare terms with a question.

A sentence's score is the question terms it contains, each weighted by how rare it is among the
candidate sentences (so "the" counts for little and "1889" for a lot), with a small preference
for sentences of higher-ranked passages. Used to pick an extractive answer and a citation's
snippet.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.text.tokenizer import tokenize

_SENTENCE_END = re.compile(r"(?<=[.!?؟。])\s+|\n+")
_MAX_SENTENCE_CHARS = 400
_RANK_DECAY = 0.15


@dataclass(frozen=True)
class RankedSentence:
    """A sentence of passage `marker` (numbered from 1) at `position`, scored for a question."""

    marker: int
    position: int
    text: str
    score: float


def split_sentences(text: str) -> list[str]:
    """Sentences (or lines) of a passage, long ones cut at a word boundary."""
    sentences = []
    for raw in _SENTENCE_END.split(text):
        sentence = " ".join(raw.split())
        if len(sentence) > _MAX_SENTENCE_CHARS:
            sentence = sentence[:_MAX_SENTENCE_CHARS].rsplit(" ", 1)[0] + " …"
        if sentence:
            sentences.append(sentence)
    return sentences


def rank_sentences(question: str, passages: Sequence[str]) -> list[RankedSentence]:
    """Every sentence of the passages, best first; ties (and sentences sharing no question term,
    score 0) keep passage rank, then position."""
    candidates = [
        (marker, position, sentence, frozenset(tokenize(sentence)))
        for marker, passage in enumerate(passages, start=1)
        for position, sentence in enumerate(split_sentences(passage))
    ]
    question_terms = set(tokenize(question))
    total = len(candidates)

    def rarity(term: str) -> float:
        containing = sum(1 for *_, terms in candidates if term in terms)
        return math.log(1 + total / containing) if containing else 0.0

    weights = {term: rarity(term) for term in question_terms}
    ranked = [
        RankedSentence(
            marker,
            position,
            sentence,
            sum(weights[t] for t in question_terms & terms) / (1 + _RANK_DECAY * (marker - 1)),
        )
        for marker, position, sentence, terms in candidates
    ]
    return sorted(ranked, key=lambda s: (-s.score, s.marker, s.position))


def best_sentences(
    question: str, passages: Sequence[str], *, max_passages: int, max_sentences: int
) -> list[tuple[int, str]]:
    """The (marker, sentence) pairs that best support an answer, best first."""
    ranked = rank_sentences(question, passages[:max_passages])
    if not ranked:
        return []
    if ranked[0].score == 0:
        # No shared term (e.g. an Arabic question over English text): retrieval judged the
        # top passage relevant, so its opening sentence is the most honest extract there is.
        # Ties sort by rank and position, so this is the first sentence of passage 1.
        return [(ranked[0].marker, ranked[0].text)]
    return [(s.marker, s.text) for s in ranked[:max_sentences] if s.score > 0]
