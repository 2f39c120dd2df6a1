"""Score fusion: each arm's scores standardised over its own list, weighted and summed."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.retrieval.fusion import standardised_score_fusion
from app.retrieval.hybrid import Recall, RetrieverConfig, fuse

pytestmark = pytest.mark.unit

ids = st.text(alphabet="abcdefghij", min_size=1, max_size=2)
scored = st.lists(
    st.tuples(ids, st.floats(min_value=0.0, max_value=30.0, allow_nan=False)),
    max_size=15,
    unique_by=lambda pair: pair[0],
).map(lambda arm: sorted(arm, key=lambda pair: -pair[1]))
weight = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)


@given(scored, scored, weight, weight)
def test_every_candidate_appears_once_best_first(
    dense: list[tuple[str, float]], keyword: list[tuple[str, float]], wd: float, wk: float
) -> None:
    fused = standardised_score_fusion([dense, keyword], [wd, wk])
    assert sorted(item for item, _ in fused) == sorted(
        {i for i, _ in dense} | {i for i, _ in keyword}
    )
    scores = [s for _, s in fused]
    assert scores == sorted(scores, reverse=True)


@given(scored, scored, weight, weight)
def test_order_of_arms_does_not_matter(
    dense: list[tuple[str, float]], keyword: list[tuple[str, float]], wd: float, wk: float
) -> None:
    forward = [i for i, _ in standardised_score_fusion([dense, keyword], [wd, wk])]
    backward = [i for i, _ in standardised_score_fusion([keyword, dense], [wk, wd])]
    assert forward == backward


def test_an_arm_whose_first_candidate_stands_out_wins_over_a_flat_one() -> None:
    # The dense arm barely prefers d1; the keyword arm's k1 is far above its other candidates.
    dense = [("d1", 0.52), ("k1", 0.51), ("x", 0.50), ("y", 0.50)]
    keyword = [("k1", 14.0), ("d1", 3.0), ("x", 2.9), ("y", 2.8)]
    assert standardised_score_fusion([dense, keyword], [1.0, 1.0])[0][0] == "k1"
    # The same keyword list, flat: the dense arm's order stands.
    flat = [("k1", 3.1), ("d1", 3.0), ("x", 2.9), ("y", 2.8)]
    peaked = [("d1", 0.80), ("k1", 0.51), ("x", 0.50), ("y", 0.50)]
    assert standardised_score_fusion([peaked, flat], [1.0, 1.0])[0][0] == "d1"


def test_an_arm_of_weight_zero_or_without_spread_adds_nothing() -> None:
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    keyword = [("c", 9.0), ("b", 1.0)]
    silent = standardised_score_fusion([dense, keyword], [1.0, 0.0])
    assert [i for i, _ in silent] == ["a", "b", "c"]
    same = [("c", 2.0), ("b", 2.0)]
    flat = standardised_score_fusion([dense, same], [1.0, 1.0])
    assert [i for i, _ in flat] == ["a", "b", "c"]


def test_the_retriever_fuses_by_score_when_configured() -> None:
    recall = Recall(dense_ids=["d1", "k1", "x"], keyword_ids=["k1", "x"], coverage=1.0)
    for cid, dense_score in (("d1", 0.52), ("k1", 0.51), ("x", 0.50)):
        recall.candidate(cid).dense_score = dense_score
    recall.candidate("k1").keyword_score = 14.0
    recall.candidate("x").keyword_score = 1.0
    by_rank = RetrieverConfig(rrf_k=5, dense_weight=10.0)
    by_score = RetrieverConfig(fusion="scores", score_dense_weight=1.0)
    assert fuse(recall, "hybrid", by_rank)[0] == "d1"
    assert fuse(recall, "hybrid", by_score)[0] == "k1"
    # The keyword gate still silences a keyword arm that matched no content word.
    recall.content_match = False
    gated = RetrieverConfig(fusion="scores", keyword_gate=True)
    assert fuse(recall, "hybrid", gated)[0] == "d1"


def test_a_cross_script_question_is_still_fused_by_rank() -> None:
    # An Arabic question over English text: its one keyword match (a name) stands far above the
    # rest of a near-empty list, which score fusion would let outvote the dense arm.
    recall = Recall(dense_ids=["d1", "d2", "k1"], keyword_ids=["k1", "d2"], coverage=1.0)
    for cid, dense_score in (("d1", 0.60), ("d2", 0.40), ("k1", 0.39)):
        recall.candidate(cid).dense_score = dense_score
    recall.candidate("k1").keyword_score = 9.0
    recall.candidate("d2").keyword_score = 0.5
    config = RetrieverConfig(fusion="scores", score_dense_weight=0.5, rrf_k=5, dense_weight=1.0)
    assert fuse(recall, "hybrid", config)[0] == "k1"
    recall.cross_script = True
    rank_fused = fuse(recall, "hybrid", replace(config, fusion="rrf"))
    assert fuse(recall, "hybrid", config) == rank_fused
