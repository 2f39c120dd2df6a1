"""The per-stage evidence every retrieval hit carries (in the retriever and in /search)."""

from __future__ import annotations

STAGE_KEYS = {
    "dense_rank",
    "dense_score",
    "second_dense_rank",
    "second_dense_score",
    "english_dense_rank",
    "english_dense_score",
    "keyword_rank",
    "keyword_score",
    "fused_score",
    "rerank_score",
    "exact_match",
}
