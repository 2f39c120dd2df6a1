"""Reciprocal Rank Fusion: combine rankings by rank, not by their incomparable scores."""

from __future__ import annotations

from collections.abc import Sequence


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], weights: Sequence[float], k: int = 60
) -> list[tuple[str, float]]:
    """Fuse ranked id lists: score(id) = sum of weight / (k + rank), rank 1-based; best first.

    Ties break on the best single rank an id reached, then on the id, so the result never
    depends on the order in which the rankings are given.
    """
    if len(rankings) != len(weights):
        raise ValueError("one weight per ranking is required")
    if k <= 0:
        raise ValueError("k must be positive")
    scores: dict[str, float] = {}
    best_rank: dict[str, int] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        seen: set[str] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:  # a duplicate in one arm must not count twice
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
            best_rank[item] = min(best_rank.get(item, rank), rank)
    ordered = sorted(scores, key=lambda item: (-scores[item], best_rank[item], item))
    return [(item, scores[item]) for item in ordered]
