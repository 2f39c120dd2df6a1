"""Ranking and answer metrics: the one implementation our evaluation harness (eval/) and a
tenant's evaluation runs both use, so their numbers are computed the same way.

Every ranking function takes the ranked ids (best first) and the set of relevant ids. Repeated
ids in a ranking count once, at their first position, so no metric can exceed 1.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from statistics import fmean


def _first_occurrences(ranked: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ranked))


def _check(relevant: Collection[str], k: int | None = None) -> None:
    if not relevant:
        raise ValueError("a query needs at least one relevant id")
    if k is not None and k <= 0:
        raise ValueError(f"k must be positive, got {k}")


def hit_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 if any relevant id is in the top k, else 0.0."""
    _check(relevant, k)
    return 1.0 if any(item in relevant for item in _first_occurrences(ranked)[:k]) else 0.0


def recall_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Share of the relevant ids found in the top k."""
    _check(relevant, k)
    found = sum(1 for item in _first_occurrences(ranked)[:k] if item in relevant)
    return found / len(set(relevant))


def reciprocal_rank(ranked: Sequence[str], relevant: Collection[str]) -> float:
    """1 / rank of the first relevant id (0.0 if none is ranked)."""
    _check(relevant)
    for position, item in enumerate(_first_occurrences(ranked), start=1):
        if item in relevant:
            return 1.0 / position
    return 0.0


def mrr_at_k(ranked: Sequence[str], relevant: Collection[str], k: int = 10) -> float:
    """Reciprocal rank of the first relevant id within the top k (0.0 below it)."""
    _check(relevant, k)
    return reciprocal_rank(_first_occurrences(ranked)[:k], relevant)


def ranking_scores(ranked: Sequence[str], relevant: Collection[str]) -> dict[str, float]:
    """hit@1, hit@5 and MRR@10 of one ranking: what a tenant's run and our reports show."""
    return {
        "hit@1": hit_at_k(ranked, relevant, 1),
        "hit@5": hit_at_k(ranked, relevant, 5),
        "mrr@10": mrr_at_k(ranked, relevant, 10),
    }


def cites_gold(cited: Iterable[object], gold: Iterable[object]) -> bool:
    """Whether an answer cited at least one expected page (or document)."""
    return bool(set(cited) & set(gold))


def percentile(values: Sequence[float], share: float) -> float:
    """The value at `share` (0.5: the median) of the sorted values, nearest rank; 0.0 if none."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] if values else 0.0


def ndcg_at_k(ranked: Sequence[str], relevant: Collection[str], k: int = 10) -> float:
    """Normalised discounted cumulative gain with binary relevance, cut at k."""
    _check(relevant, k)
    gains = (
        1.0 / math.log2(position + 1)
        for position, item in enumerate(_first_occurrences(ranked)[:k], start=1)
        if item in relevant
    )
    ideal = sum(
        1.0 / math.log2(position + 1) for position in range(1, min(len(set(relevant)), k) + 1)
    )
    return sum(gains) / ideal


def summarize(
    rankings: Iterable[Sequence[str]], golds: Iterable[Collection[str]]
) -> dict[str, float]:
    """Mean nDCG@10, hit@1, hit@5, recall@10 and MRR over queries (rankings and golds aligned)."""
    rows = [
        {
            "ndcg@10": ndcg_at_k(ranked, gold, 10),
            "hit@1": hit_at_k(ranked, gold, 1),
            "hit@5": hit_at_k(ranked, gold, 5),
            "recall@10": recall_at_k(ranked, gold, 10),
            "mrr": reciprocal_rank(ranked, gold),
        }
        for ranked, gold in zip(rankings, golds, strict=True)
    ]
    if not rows:
        raise ValueError("no queries to summarise")
    return {name: fmean(row[name] for row in rows) for name in rows[0]}
