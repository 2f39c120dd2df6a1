"""The gold-shown ceiling per passage limit counts what the model would read under each."""

from __future__ import annotations

import pytest

from app.domain import Chunk, SearchHit
from app.generation.answer_limits import PassageLimits
from eval.shown_gold import gold_shown_by_limits

pytestmark = pytest.mark.unit

QUESTION = "How do I change the colour of the plot border?"


def _hit(page: int, text: str) -> SearchHit:
    return SearchHit(
        Chunk(f"c{page}", "t", "d", "m.pdf", page, str(page), 0, 0, len(text), text), 1.0
    )


def test_a_gold_page_ranked_fourth_is_shown_only_with_four_passages() -> None:
    hits = [
        _hit(3, "The plot border colour is set with set border lc."),
        _hit(4, "Border widths are given in points for the plot."),
        _hit(5, "A colour name or an rgb value selects the colour."),
        _hit(9, "Change the border of the plot with set border and a colour."),
    ]
    limits = PassageLimits(max_passages=3, max_passage_chars=3000, focus_chars=700, best_last=True)

    shown = gold_shown_by_limits(
        QUESTION, hits, [9], limits, grid=((3, 700, 3000), (4, 700, 3000), (4, 0, 3000))
    )

    assert shown == {(3, 700, 3000): False, (4, 700, 3000): True, (4, 0, 3000): True}
