"""Which parts of a question are meant literally."""

from __future__ import annotations

import pytest

from app.retrieval.exact_match import exact_terms

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("question", "terms"),
    [
        ("What is the weight of 6672WN5504?", ["6672WN5504"]),
        ("Is SR-33 in stock?", ["SR-33"]),
        ('Which model has the "red handle"?', ["red handle"]),
        ("Which model has the “red handle”?", ["red handle"]),
        ("ما هو «المقبض الأحمر» في 6672WN5504؟", ["المقبض الأحمر", "6672WN5504"]),
        ("Which drill weighs 4.2 kg?", ["4.2 kg"]),
        ("What does section No. 12 say?", ["No. 12"]),
        ("changes since v1.2", ["v1.2"]),
        ("status of invoice #45", ["#45"]),
    ],
)
def test_literal_terms_are_found(question: str, terms: list[str]) -> None:
    assert exact_terms(question) == terms


@pytest.mark.parametrize(
    "question",
    [
        "What happened in the 1990s?",
        "Who came 2nd in the race?",
        "How many people live in 3 cities in total?",
        "What is the capital of France?",
        "",
        '""',
        "ما هي عاصمة مصر؟",
    ],
)
def test_ordinary_words_and_numbers_are_not_literal_terms(question: str) -> None:
    assert exact_terms(question) == []


def test_terms_are_not_repeated() -> None:
    assert exact_terms("SR-33 or SR-33?") == ["SR-33"]
