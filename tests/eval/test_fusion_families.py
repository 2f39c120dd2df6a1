"""The per-query dense lean measured leave-one-manual-out (eval/fusion_families.py): its signals
read the arms' score shapes, and a question whose dense arm stands out is ranked more by it."""

from __future__ import annotations

import pytest

from app.retrieval.hybrid import Recall
from eval.fusion_families import FAMILIES, arm_signals, leans_dense

pytestmark = pytest.mark.unit


def _recall(dense: list[float], keyword: list[float]) -> Recall:
    """Two arms that share no candidate: d1.. with the dense scores, k1.. with the keyword ones."""
    recall = Recall(coverage=1.0)
    for rank, score in enumerate(dense, start=1):
        candidate = recall.candidate(f"d{rank}")
        candidate.dense_rank, candidate.dense_score = rank, score
        recall.dense_ids.append(f"d{rank}")
    for rank, score in enumerate(keyword, start=1):
        candidate = recall.candidate(f"k{rank}")
        candidate.keyword_rank, candidate.keyword_score = rank, score
        recall.keyword_ids.append(f"k{rank}")
    return recall


PEAKED_DENSE = [0.9, 0.31, 0.3, 0.29, 0.28, 0.27]
FLAT_KEYWORD = [5.0, 4.95, 4.9, 4.85, 4.8, 4.75]


def test_a_dense_arm_that_stands_out_over_a_flat_keyword_arm_leans_dense() -> None:
    leaning = arm_signals(_recall(PEAKED_DENSE, FLAT_KEYWORD))
    opposite = arm_signals(_recall(FLAT_KEYWORD, PEAKED_DENSE))
    assert leaning["peaks"] > 0 > opposite["peaks"]
    assert leaning["keyword_gap"] == pytest.approx(0.04)
    assert leaning["agree"] == 0.0
    assert leans_dense(_recall(PEAKED_DENSE, FLAT_KEYWORD), "peaks", 0.5)
    assert not leans_dense(_recall(FLAT_KEYWORD, PEAKED_DENSE), "peaks", 0.5)
    assert leans_dense(_recall(PEAKED_DENSE, FLAT_KEYWORD), "keyword_gap", 0.2)


def test_the_lean_raises_a_standing_out_dense_first_and_boost_one_is_todays_order() -> None:
    family = next(f for f in FAMILIES if f.name == "dense-lean-smooth")
    base = {"fusion": "blend", "pin": True, "headings": True, "role_shift": 10}
    today = family.order({**base, "low": 0.0, "high": 2.0, "boost": 1.0})
    leaned = family.order({**base, "low": 0.0, "high": 2.0, "boost": 8.0})
    recall = _recall(PEAKED_DENSE, FLAT_KEYWORD)
    assert today(recall, "q").index("d1") > leaned(recall, "q").index("d1") == 0
    # A question whose keyword arm stands out more (peaks under `low`) is not leaned.
    other = _recall(FLAT_KEYWORD, PEAKED_DENSE)
    assert today(other, "q") == leaned(other, "q")
