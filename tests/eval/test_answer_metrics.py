"""Answer-evaluation scoring: gold-span match, marker counting, cited pages of manual answers."""

from __future__ import annotations

import pytest

from eval.answers import ManualOutcome, contains_span, shown_marker_counts, summarise_manuals

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


def _manual(shown: list[int], cited: list[int], *, refused: bool = False) -> ManualOutcome:
    return ManualOutcome(
        id="q",
        manual="R-admin",
        question="How do I ...?",
        gold_pages=[10, 48],
        shown_pages=shown,
        cited_pages=cited,
        answer="refused" if refused else "An answer [1].",
        refused=refused,
        gate_refused=False,
        refusal_probability=None,
        first_token_seconds=1.0,
        seconds=5.0,
    )


def test_manual_answer_misses_are_counted_by_cause() -> None:
    outcomes = [
        _manual([48, 3], [48]),  # cites the second gold page: a hit
        _manual([3, 4], [3]),  # gold never shown
        _manual([3, 4], [], refused=True),  # gold never shown, refused
        _manual([3, 10], [3]),  # gold shown, another passage cited
        _manual([10], [], refused=True),  # gold shown, refused
    ]

    summary = summarise_manuals(outcomes)

    assert [o.cause for o in outcomes] == [
        "",
        "gold_not_shown",
        "gold_not_shown",
        "other_cited",
        "refused_gold_shown",
    ]
    assert summary["cites_gold"] == pytest.approx(1 / 5)
    assert summary["answered_citing_only_wrong"] == pytest.approx(2 / 5)
    assert summary["refused"] == pytest.approx(2 / 5)
    assert (summary["gold_not_shown"], summary["other_cited"]) == (2, 1)
    assert summary["refused_gold_shown"] == 1
