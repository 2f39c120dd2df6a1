"""Ranking metrics: hand-computed values, edge cases and invariants."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval.metrics import hit_at_k, ndcg_at_k, recall_at_k, reciprocal_rank, summarize

pytestmark = pytest.mark.unit


def test_single_relevant_at_rank_three():
    ranked = ["a", "b", "gold", "c"]

    assert hit_at_k(ranked, {"gold"}, 1) == 0.0
    assert hit_at_k(ranked, {"gold"}, 3) == 1.0
    assert reciprocal_rank(ranked, {"gold"}) == pytest.approx(1 / 3)
    assert ndcg_at_k(ranked, {"gold"}, 10) == pytest.approx(1 / math.log2(4))
    assert ndcg_at_k(ranked, {"gold"}, 2) == 0.0


def test_several_relevant_items():
    ranked = ["x", "r1", "y", "r2"]
    relevant = {"r1", "r2", "r3"}

    assert recall_at_k(ranked, relevant, 4) == pytest.approx(2 / 3)
    assert recall_at_k(ranked, relevant, 2) == pytest.approx(1 / 3)
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(ranked, relevant, 10) == pytest.approx(dcg / ideal)
    assert ndcg_at_k(["r1", "r2", "r3"], relevant, 2) == pytest.approx(1.0)


def test_repeated_ids_count_once():
    assert recall_at_k(["r", "r", "r"], {"r", "s"}, 3) == 0.5
    assert ndcg_at_k(["r", "r"], {"r"}, 10) == 1.0


def test_nothing_relevant_retrieved_scores_zero():
    assert reciprocal_rank([], {"gold"}) == 0.0
    assert ndcg_at_k(["a", "b"], {"gold"}) == 0.0


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="relevant"):
        ndcg_at_k(["a"], set())
    with pytest.raises(ValueError, match="k must be positive"):
        hit_at_k(["a"], {"a"}, 0)
    with pytest.raises(ValueError, match="no queries"):
        summarize([], [])
    with pytest.raises(ValueError):
        summarize([["a"]], [{"a"}, {"b"}])


def test_summarize_averages_over_queries():
    result = summarize([["g1", "x"], ["x", "g2"]], [{"g1"}, {"g2"}])

    assert result["hit@1"] == 0.5
    assert result["mrr"] == pytest.approx(0.75)
    assert result["ndcg@10"] == pytest.approx((1 + 1 / math.log2(3)) / 2)


ids = st.sampled_from(list("abcdefghij"))


@given(st.lists(ids, max_size=15), st.sets(ids, min_size=1), st.integers(1, 12))
def test_every_metric_lies_between_zero_and_one(ranked, relevant, k):
    for value in (
        hit_at_k(ranked, relevant, k),
        recall_at_k(ranked, relevant, k),
        ndcg_at_k(ranked, relevant, k),
        reciprocal_rank(ranked, relevant),
    ):
        assert 0.0 <= value <= 1.0 + 1e-12


@given(st.sets(ids, min_size=1), st.lists(ids, max_size=5))
def test_relevant_items_first_is_a_perfect_ranking(relevant, rest):
    ranked = sorted(relevant) + [x for x in rest if x not in relevant]

    assert ndcg_at_k(ranked, relevant, 10) == pytest.approx(1.0)
    assert reciprocal_rank(ranked, relevant) == 1.0
    assert recall_at_k(ranked, relevant, len(ranked)) == 1.0
