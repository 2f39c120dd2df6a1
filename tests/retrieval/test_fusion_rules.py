"""Fusion rules of the hybrid retriever: page-role demotion and the cross-script rule."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.domain import Chunk
from app.retrieval.hybrid import Recall, RetrieverConfig, demote_page_roles, fuse
from app.retrieval.keyword import token_script

pytestmark = pytest.mark.unit


def _chunk(cid: str, role: str | None = None) -> Chunk:
    return Chunk(cid, "t", "d", "s.pdf", 1, "1", 0, 0, 1, cid, {}, role)  # type: ignore[arg-type]


def _recall(roles: dict[str, str | None], pinned: list[str] | None = None) -> Recall:
    recall = Recall(pinned=pinned or [])
    for cid, role in roles.items():
        recall.candidate(cid).chunk = _chunk(cid, role)
    return recall


def test_role_pages_yield_the_configured_number_of_places_and_are_kept() -> None:
    recall = _recall({"toc": "contents", "a": None, "b": None, "c": None, "idx": "index"})
    ordered = ["toc", "a", "b", "idx", "c"]
    assert demote_page_roles(ordered, recall, 0) == ordered
    assert demote_page_roles(ordered, recall, 2) == ["a", "b", "toc", "c", "idx"]
    assert demote_page_roles(ordered, recall, 10) == ["a", "b", "c", "toc", "idx"]


def test_an_exact_match_on_a_role_page_stays_ahead_of_the_rest() -> None:
    recall = _recall({"idx": "index", "a": None, "b": None}, pinned=["idx"])
    assert demote_page_roles(["idx", "a", "b"], recall, 10)[0] == "idx"


def _cross_lingual_recall(cross_script: bool) -> Recall:
    # Dense ranks x first; the keyword arm matched only a Latin name, found in y alone.
    recall = Recall(dense_ids=["x", "y", "z"], keyword_ids=["y"], coverage=0.02)
    recall.cross_script = cross_script
    for cid in "xyz":
        recall.candidate(cid)
    return recall


def test_a_cross_script_query_lets_its_latin_name_match_count() -> None:
    config = RetrieverConfig(rrf_k=5, dense_weight=0.4, cross_script_rrf_k=60)
    # Same query, not cross-script: coverage scaling silences the keyword arm.
    assert fuse(_cross_lingual_recall(False), "hybrid", config)[0] == "x"
    assert fuse(_cross_lingual_recall(True), "hybrid", config)[0] == "y"
    # With the rule off, cross-script queries fuse like any other.
    off = replace(config, cross_script_rrf_k=0)
    assert fuse(_cross_lingual_recall(True), "hybrid", off)[0] == "x"


@pytest.mark.parametrize(
    ("token", "script"),
    [("نهر", "arabic"), ("paris", "latin"), ("1990", "digits"), ("sr-33", "latin")],
)
def test_token_script(token: str, script: str) -> None:
    assert token_script(token) == script
