"""Answer-evaluation scoring: normalised gold-span match and marker counting."""

from __future__ import annotations

import pytest

from eval.answers import contains_span, shown_marker_counts

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("The tower was finished in 1889 [1].", "1889"),
        ("Designed by GUSTAVE EIFFEL's company [1].", "Gustave Eiffel"),
        ("It is the Louvre, in Paris [2].", "the Louvre"),
        ("بُنِيَ البرجُ عام ١٨٨٩ [1].", "عام 1889"),
        ("أكمل في المدرسة", "اكمل في المدرسه"),
    ],
)
def test_gold_span_matches_after_normalisation(answer: str, gold: str) -> None:
    assert contains_span(answer, gold)


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("Eiffel designed it in 1889.", "Gustave Eiffel"),  # partial span is not a match
        ("In 18890 [1].", "1889"),  # no match inside a longer number
        ("Anything.", ""),
    ],
)
def test_gold_span_does_not_match_partial_or_empty(answer: str, gold: str) -> None:
    assert not contains_span(answer, gold)


def test_marker_counts_flag_out_of_range_numbers() -> None:
    assert shown_marker_counts("A [1][2]. B [1, 7]. C [note].", passages=3) == (4, 1)
