"""The crumb count says when a gold page was shown only as a few words."""

from __future__ import annotations

import pytest

from eval.focus_crumbs import CrumbCount

pytestmark = pytest.mark.unit


def test_a_gold_page_shown_as_a_few_words_is_counted_apart() -> None:
    count = CrumbCount()
    neighbour = "The my2tics command controls minor tic marks on the second y axis. " * 4
    count.add(["… Tip", neighbour, "5.10."], [89, 88, 90], [89])
    count.add([neighbour, "Use set y2tics to put major tic marks on it. " * 4], [88, 89], [89])

    assert (count.questions, count.passages, count.crumbs) == (2, 5, 2)
    assert (count.gold_shown, count.gold_only_crumbs) == (2, 1)
    assert count.gold_chars == [5, 180]
    assert count.row().startswith("2.50 | 0.400 | 1.000 | 1 | 92 |")
