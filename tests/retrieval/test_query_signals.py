"""Query-time signals: how rare the question's words are in the text, how peaked an arm is."""

from __future__ import annotations

import pytest

from app.retrieval.query_signals import idf, peakedness, rare_word_coverage

pytestmark = pytest.mark.unit


def test_a_rare_word_weighs_more_than_a_common_one() -> None:
    assert idf(1, 1000) > idf(100, 1000) > idf(900, 1000) >= 0


def test_holding_only_the_common_words_of_a_question_is_low_coverage() -> None:
    # Half the words occur either way; what occurs matters: "set" is in 400 of 1000 chunks,
    # "printer" in 3, "colour" in none.
    only_common = rare_word_coverage({"colour": 0, "set": 400}, 1000)
    rare_held = rare_word_coverage({"colour": 0, "printer": 3}, 1000)
    assert only_common < 0.2 < 0.4 < rare_held < 1.0
    assert rare_word_coverage({"printer": 3, "set": 400}, 1000) == 1.0
    assert rare_word_coverage({}, 1000) == 1.0


def test_a_first_score_far_above_the_rest_is_peaked_a_flat_list_is_not() -> None:
    assert peakedness([9.0, 2.0, 1.9, 1.8, 1.7]) > 1.9
    assert peakedness([0.5, 0.5, 0.5]) == 0.0
    assert peakedness([0.7]) == 0.0
    assert peakedness([3.0, 2.9, 2.8, 2.7]) < peakedness([9.0, 2.9, 2.8, 2.7])
