"""The plain-ensemble baseline ranks, fuses and reads results as the peer it stands for."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from eval.peer_ensemble import (
    PeerIndex,
    arm_rankings,
    mean_row,
    page_order,
    reciprocal_rank_fusion,
    shipped_scores,
    whitespace_tokens,
)

pytestmark = pytest.mark.unit


def test_fusion_puts_a_chunk_both_arms_found_above_each_arms_own_first() -> None:
    # 7 is first for neither arm but second for both: 2/62 beats 1/61 + nothing.
    assert reciprocal_rank_fusion([[1, 7, 3], [2, 7, 4]])[0] == 7


def test_fusion_of_one_arm_keeps_its_order() -> None:
    assert reciprocal_rank_fusion([[5, 3, 9]]) == [5, 3, 9]


def test_bm25_tokens_are_split_on_white_space_only() -> None:
    # No lowercasing and no punctuation stripping: "Plot," and "plot" are different words.
    assert whitespace_tokens("Plot, the plot\tborder\n") == ["Plot,", "the", "plot", "border"]


def test_pages_are_ranked_once_each_by_their_best_chunk() -> None:
    index = PeerIndex([4, 4, 9, 2], BM25Okapi([["a"], ["b"], ["c"], ["d"]]), np.eye(4))
    assert page_order(index, [1, 0, 3, 2]) == ["4", "2", "9"]


def test_each_arm_ranks_what_it_matches_first() -> None:
    texts = ["set border colour red", "the axis label font", "install the package"]
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [0.7071, 0.7071]], dtype=np.float32)
    index = PeerIndex([1, 2, 3], BM25Okapi([whitespace_tokens(t) for t in texts]), vectors)

    ranked = arm_rankings(index, "border colour", np.array([0.0, 1.0], dtype=np.float32))

    assert ranked["bm25"][0] == 0  # the only chunk holding the words
    assert ranked["dense"][0] == 1  # the vector closest to the question's
    assert set(ranked["ensemble"]) == {0, 1, 2}


def test_shipped_figures_come_from_the_first_file_holding_each_manual(tmp_path: Path) -> None:
    table = tmp_path / "loo.json"
    held_out = tmp_path / "held-out.json"
    row = {"hit@1": 0.5, "hit@5": 0.8, "mrr@10": 0.6}
    table.write_text(json.dumps({"manuals": {"xfig": {"shipped": row}}}))
    other = {"hit@1": 0.1, "hit@5": 0.1, "mrr@10": 0.1}
    held_out.write_text(
        json.dumps(
            {"manuals": {"xfig": {"shipped": other}}, "held_out": {"R-intro": {"shipped": other}}}
        )
    )

    shipped = shipped_scores([table, held_out, tmp_path / "missing.json"])

    assert shipped == {"xfig": row, "R-intro": other}


def test_the_mean_weighs_each_manual_the_same() -> None:
    def scores(value: float) -> dict[str, float]:
        return {"hit@1": value, "hit@5": value, "mrr@10": value}

    rows = [
        {"n": 10, "bm25": scores(0.2), "dense": scores(0.4), "ensemble": scores(0.6)},
        {"n": 30, "bm25": scores(0.4), "dense": scores(0.6), "ensemble": scores(0.8)},
    ]

    mean = mean_row(rows)

    assert mean["n"] == 40
    assert mean["ensemble"]["hit@5"] == pytest.approx(0.7)
    assert "shipped" not in mean  # no manual had a shipped figure
