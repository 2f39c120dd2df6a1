"""Places reserved for each arm's first candidates: a fused ranking never buries an arm's best."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.retrieval.fusion import reserve_places
from app.retrieval.hybrid import Recall, RetrieverConfig, fuse

pytestmark = pytest.mark.unit

orders = st.lists(st.sampled_from("abcdefghijkl"), unique=True, max_size=12)


@given(orders, orders, st.integers(min_value=0, max_value=6))
def test_reserved_ids_land_within_the_head_and_nothing_is_lost(
    ordered: list[str], wanted: list[str], within: int
) -> None:
    out = reserve_places(ordered, wanted, within)
    assert sorted(out) == sorted(ordered)
    held = [w for w in wanted if w in ordered]
    best_placed = sorted(held, key=ordered.index)[:within]
    assert all(out.index(w) < within for w in best_placed)
    # Everything else keeps its relative order.
    rest = [c for c in out if c not in best_placed]
    assert rest == [c for c in ordered if c not in best_placed]


def test_an_id_already_inside_the_head_changes_nothing() -> None:
    assert reserve_places(["a", "b", "c", "d"], ["b"], 3) == ["a", "b", "c", "d"]


def test_a_buried_id_takes_the_last_place_of_the_head() -> None:
    assert reserve_places(["a", "b", "c", "d", "e"], ["e"], 3) == ["a", "b", "e", "c", "d"]


def _recall() -> Recall:
    # The keyword arm agrees on nothing with the dense arm, whose first candidate is d1.
    recall = Recall(
        dense_ids=["d1", "d2", "d3", "d4"],
        keyword_ids=["k1", "k2", "k3", "k4", "k5", "k6"],
        coverage=1.0,
    )
    for rank, cid in enumerate(recall.dense_ids, start=1):
        recall.candidate(cid).dense_rank = rank
    for rank, cid in enumerate(recall.keyword_ids, start=1):
        recall.candidate(cid).keyword_rank = rank
    return recall


def test_the_dense_arms_first_candidate_is_not_buried_by_the_keyword_arm() -> None:
    config = RetrieverConfig(rrf_k=5, dense_weight=0.3)
    # Rank fusion alone puts the dense arm's best under all six keyword candidates.
    assert fuse(_recall(), "hybrid", config).index("d1") == 6
    reserved = replace(config, reserve_dense_first=1, reserve_within=3)
    recall = _recall()
    ordered = fuse(recall, "hybrid", reserved)
    assert ordered[:3] == ["k1", "k2", "d1"]
    assert "arm_first_reserved" in recall.candidates["d1"].rules
    # The place fusion gave it is still what /search explains.
    assert recall.candidates["d1"].fused_rank == 7


def test_exact_matches_stay_first_and_dense_or_keyword_modes_are_untouched() -> None:
    config = RetrieverConfig(rrf_k=5, dense_weight=0.3, reserve_dense_first=1, reserve_within=1)
    recall = _recall()
    recall.pinned = ["k6"]
    assert fuse(recall, "hybrid", config)[:2] == ["k6", "d1"]
    assert fuse(_recall(), "keyword", config)[0] == "k1"


def test_a_gated_keyword_arm_gets_no_reserved_place() -> None:
    config = RetrieverConfig(
        rrf_k=5, dense_weight=1.0, keyword_gate=True, reserve_keyword_first=1, reserve_within=1
    )
    recall = _recall()
    recall.content_match = False  # the question matched no content word: keyword arm off
    assert fuse(recall, "hybrid", config)[0] == "d1"
    recall = _recall()
    assert fuse(recall, "hybrid", config)[0] == "k1"


def _scored_recall() -> Recall:
    # k1 is the keyword arm's clear first; d1 the dense arm's; x is second in both.
    recall = Recall(dense_ids=["d1", "x", "d3"], keyword_ids=["k1", "x", "k3"], coverage=1.0)
    for cid, score in zip(recall.dense_ids, (0.62, 0.60, 0.30), strict=True):
        recall.candidate(cid).dense_score = score
    for cid, score in zip(recall.keyword_ids, (9.0, 8.5, 1.0), strict=True):
        recall.candidate(cid).keyword_score = score
    return recall


def test_the_blend_fuses_the_rank_order_and_the_score_order() -> None:
    base = RetrieverConfig(rrf_k=5, dense_weight=0.3, score_dense_weight=0.5)
    by_rank = fuse(_scored_recall(), "hybrid", replace(base, fusion="rrf"))
    by_score = fuse(_scored_recall(), "hybrid", replace(base, fusion="scores"))
    recall = _scored_recall()
    blended = fuse(recall, "hybrid", replace(base, fusion="blend"))
    assert sorted(blended) == sorted(by_rank) == sorted(by_score)
    assert recall.fusion is not None and recall.fusion.method == "blend"
    # Whatever both orders put first, the blend puts first; its score is the blend's RRF.
    assert by_rank[0] == by_score[0] == blended[0]
    score_weight = base.blend_score_weight
    assert recall.candidates[blended[0]].fused_score == pytest.approx(
        (1.0 + score_weight) / (base.blend_rrf_k + 1)
    )


def test_a_cross_script_question_is_fused_by_rank_under_the_blend() -> None:
    config = RetrieverConfig(rrf_k=5, dense_weight=0.3, fusion="blend")
    recall = _scored_recall()
    recall.cross_script = True
    fuse(recall, "hybrid", config)
    assert recall.fusion is not None and recall.fusion.method == "rrf"


def test_the_dense_arms_very_first_can_be_kept_closer_to_the_top_than_its_second() -> None:
    config = RetrieverConfig(rrf_k=5, dense_weight=0.3, reserve_dense_first=2, reserve_within=5)
    # Both of the dense arm's first two take the last places of the five.
    assert fuse(_recall(), "hybrid", config)[:5] == ["k1", "k2", "k3", "d1", "d2"]
    tighter = replace(config, reserve_dense_top_within=3)
    recall = _recall()
    ordered = fuse(recall, "hybrid", tighter)
    assert ordered[:5] == ["k1", "k2", "d1", "k3", "d2"]
    assert recall.candidates["d1"].rules.count("arm_first_reserved") == 1
    # Alone (no places reserved for the first two) it keeps the dense arm's first in reach.
    alone = RetrieverConfig(rrf_k=5, dense_weight=0.3, reserve_dense_top_within=2)
    assert fuse(_recall(), "hybrid", alone)[:2] == ["k1", "d1"]
