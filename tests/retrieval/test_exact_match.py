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


def test_terms_and_quoted_phrases_are_capped_in_the_order_typed() -> None:
    from app.retrieval.exact_match import ExactLimits

    phrases = " ".join(f'"phrase number {i}"' for i in range(10))
    codes = " ".join(f"AB-{i}" for i in range(500))
    terms = exact_terms(f"{phrases} {codes}", ExactLimits(max_terms=8, max_phrases=3))
    assert terms == [
        "phrase number 0",
        "phrase number 1",
        "phrase number 2",
        "AB-0",
        "AB-1",
        "AB-2",
        "AB-3",
        "AB-4",
    ]


def test_the_default_limits_bound_a_pasted_list_of_identifiers() -> None:
    codes = " ".join(f"SKU-{i:04d}" for i in range(500))
    assert len(exact_terms(codes)) == 16
