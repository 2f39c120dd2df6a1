"""Sentence splitting and the sentences that best match a question."""

from __future__ import annotations

import pytest

from app.text.sentences import best_sentences, split_sentences

pytestmark = pytest.mark.unit


def test_sentences_split_on_latin_and_arabic_punctuation() -> None:
    assert split_sentences("One. Two? ثلاثة؟ أربعة\nfive") == [
        "One.",
        "Two?",
        "ثلاثة؟",
        "أربعة",
        "five",
    ]


def test_rare_shared_terms_pick_the_sentence_and_its_passage() -> None:
    passages = (
        "The tower is in Paris. It was completed in 1889.",
        "The museum is in Paris. It opened in 1793.",
    )
    chosen = best_sentences("When was it completed?", passages, max_passages=2, max_sentences=1)
    assert chosen == [(1, "It was completed in 1889.")]


def test_no_shared_term_falls_back_to_the_first_sentence_of_the_top_passage() -> None:
    passages = ("First line here. Second line.", "Other passage.")
    chosen = best_sentences("ما هذا؟", passages, max_passages=2, max_sentences=2)
    assert chosen == [(1, "First line here.")]
