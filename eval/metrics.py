"""The ranking metrics of our harness: the service's own (app/ranking_metrics.py), so the
numbers in docs/evaluation.md and a tenant's evaluation run are computed the same way."""

from __future__ import annotations

from app.ranking_metrics import (
    cites_gold,
    hit_at_k,
    mrr_at_k,
    ndcg_at_k,
    percentile,
    ranking_scores,
    recall_at_k,
    reciprocal_rank,
    summarize,
)

__all__ = [
    "cites_gold",
    "hit_at_k",
    "mrr_at_k",
    "ndcg_at_k",
    "percentile",
    "ranking_scores",
    "recall_at_k",
    "reciprocal_rank",
    "summarize",
]
