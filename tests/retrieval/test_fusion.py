"""Reciprocal Rank Fusion invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.retrieval.fusion import reciprocal_rank_fusion

pytestmark = pytest.mark.unit

ids = st.text(alphabet="abcdefghij", min_size=1, max_size=2)
ranking = st.lists(ids, max_size=15, unique=True)
weight = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)


@given(ranking, ranking, weight, weight, st.integers(min_value=1, max_value=200))
def test_order_of_arms_does_not_matter(
    dense: list[str], keyword: list[str], wd: float, wk: float, k: int
) -> None:
    forward = reciprocal_rank_fusion([dense, keyword], [wd, wk], k)
    backward = reciprocal_rank_fusion([keyword, dense], [wk, wd], k)
    assert forward == backward


@given(ranking, ranking, st.integers(min_value=1, max_value=200))
def test_a_chunk_first_in_both_arms_is_first(dense: list[str], keyword: list[str], k: int) -> None:
    top = "TOP"
    fused = reciprocal_rank_fusion([[top, *dense], [top, *keyword]], [1.0, 1.0], k)
    assert fused[0][0] == top


@given(ranking, ranking)
def test_every_candidate_appears_once(dense: list[str], keyword: list[str]) -> None:
    fused = [item for item, _ in reciprocal_rank_fusion([dense, keyword], [1.0, 1.0])]
    assert sorted(fused) == sorted(set(dense) | set(keyword))
    scores = [s for _, s in reciprocal_rank_fusion([dense, keyword], [1.0, 1.0])]
    assert scores == sorted(scores, reverse=True)


def test_agreement_beats_a_single_first_place() -> None:
    fused = reciprocal_rank_fusion([["a", "b"], ["c", "b"]], [1.0, 1.0], k=60)
    assert fused[0][0] == "b"
    assert fused[0][1] == pytest.approx(2 / 62)


def test_weights_shift_the_balance() -> None:
    fused = reciprocal_rank_fusion([["dense"], ["keyword"]], [1.0, 2.0], k=60)
    assert [item for item, _ in fused] == ["keyword", "dense"]
    only_dense = reciprocal_rank_fusion([["dense"], ["keyword"]], [1.0, 0.0], k=60)
    assert only_dense[0][0] == "dense"


def test_duplicates_within_one_arm_count_once() -> None:
    fused = dict(reciprocal_rank_fusion([["a", "a", "b"], []], [1.0, 1.0], k=60))
    assert fused["a"] == pytest.approx(1 / 61)


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], [1.0, 1.0])
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], [1.0], k=0)
