"""The retrieval test bench: /search with `"explain": true` on the real stack.

The explanation must be the ranking's own: each result's keyword and dense ranks and scores, its
fused rank and score (which re-add, with the fusion's reported weights, to the RRF of those
ranks), the rules that moved it (exact-match forcing, heading promotion, the relevance gate) and
the words it matched. Without the flag nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from testkit.builders import text_document
from tests.api.harness import ApiHarness, ApiUser

pytestmark = pytest.mark.integration

TENANT = "explain"
PARTS = (
    "Safety relief valve SR-33 must be replaced every 500 operating hours by the engineer.",
    "Lubrication schedule\nGrease the winch bearings weekly and oil the hinges of the hatch.",
    "The ferry leaves Wick at nine; passengers board from the north quay with their tickets.",
    "Engine room fire drills happen monthly; every crew member learns the extinguisher types.",
)


@dataclass
class Corpus:
    user: ApiUser


@pytest.fixture(scope="module")
def corpus(api: ApiHarness) -> Corpus:
    user = api.add_user(TENANT)
    for number, part in enumerate(PARTS, start=1):
        job = api.upload_and_wait(user, f"part{number}.txt", text_document(part))
        assert job["status"] == "done", job
    return Corpus(user)


def test_each_result_explains_its_ranks_scores_and_matched_words(
    api: ApiHarness, corpus: Corpus
) -> None:
    query = "when does the ferry leave wick"
    body = api.search(corpus.user, query, explain=True, k=4)
    fusion = body["explain"]["fusion"]
    assert fusion["mode"] == "hybrid" and fusion["method"] in ("rrf", "scores", "blend")
    assert body["explain"]["gate"]["relevant"] is True
    first = body["results"][0]
    assert first["source"] == "part3.txt"
    explain = first["explain"]
    assert explain["keyword_rank"] == first["stages"]["keyword_rank"] == 1
    assert explain["dense_rank"] == first["stages"]["dense_rank"]
    assert explain["fused_rank"] == 1
    assert set(explain["matched_terms"]) >= {"ferry", "wick"}
    assert "engineer" not in explain["matched_terms"]
    for result in body["results"]:
        shown = result["explain"]
        assert all(term in result["text"].casefold() for term in shown["matched_terms"])
        if fusion["method"] != "rrf":
            continue  # score fusion: standardised scores, checked by the order below
        # The fused score is the RRF of the two ranks with the weights the fusion reports.
        expected = 0.0
        if shown["dense_rank"] is not None:
            expected += fusion["dense_weight"] / (fusion["rrf_k"] + shown["dense_rank"])
        if shown["keyword_rank"] is not None:
            expected += fusion["keyword_weight"] / (fusion["rrf_k"] + shown["keyword_rank"])
        assert shown["fused_score"] == pytest.approx(expected)
    ranks = [r["explain"]["fused_rank"] for r in body["results"]]
    scores = [r["explain"]["fused_score"] for r in body["results"]]
    assert sorted(ranks) == ranks and sorted(scores, reverse=True) == scores


def test_rules_that_moved_a_result_are_named(api: ApiHarness, corpus: Corpus) -> None:
    exact = api.search(corpus.user, "SR-33", explain=True, k=4)
    assert exact["explain"]["exact_terms"]
    pinned = exact["results"][0]
    assert pinned["source"] == "part1.txt"
    assert "exact_match" in pinned["explain"]["rules"]
    assert all("exact_match" not in r["explain"]["rules"] for r in exact["results"][1:])

    heading = api.search(corpus.user, "Lubrication schedule", explain=True, k=4)
    top = heading["results"][0]
    assert top["source"] == "part2.txt"
    assert "heading_promoted" in top["explain"]["rules"]

    off_topic = api.search(corpus.user, "quantum chromodynamics of gluon plasma", explain=True)
    assert off_topic["relevant"] is False
    assert off_topic["explain"]["gate"]["relevant"] is False
    assert off_topic["explain"]["gate"]["reason"]
    assert all("relevance_gate" in r["explain"]["rules"] for r in off_topic["results"])


def test_without_explain_the_search_body_is_unchanged(api: ApiHarness, corpus: Corpus) -> None:
    plain = api.search(corpus.user, "when does the ferry leave wick", k=4)
    explained = api.search(corpus.user, "when does the ferry leave wick", k=4, explain=True)
    assert plain["explain"] is None
    assert all(r["explain"] is None for r in plain["results"])
    assert [r["text"] for r in plain["results"]] == [r["text"] for r in explained["results"]]
    assert [r["stages"] for r in plain["results"]] == [r["stages"] for r in explained["results"]]
