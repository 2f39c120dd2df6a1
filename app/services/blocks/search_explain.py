"""The retrieval test bench's explanation of each /search result (`"explain": true`).

Everything comes from what the retrieval stages recorded on the hit (the arms' ranks and scores,
the fused place, the rules that moved it) and on the result (the fusion's weights, the
relevance gate); only the matched terms are worked out here, with the keyword index's own
tokenizer, so they are the words BM25 matched.
"""

from __future__ import annotations

from dataclasses import asdict, is_dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.domain import RetrievalResult, SearchHit
    from app.text.tokenizer import Tokenizer

_SHOWN_TERMS = 30


def matched_terms(tokenizer: Tokenizer, query: str, text: str) -> list[str]:
    """The query's keyword terms that the passage holds, in the query's order."""
    held = set(tokenizer(text))
    return [term for term in dict.fromkeys(tokenizer(query)) if term in held][:_SHOWN_TERMS]


def hit_explanation(
    hit: SearchHit, result: RetrievalResult, tokenizer: Tokenizer, query: str
) -> dict[str, Any]:
    """Why this hit ranked where it did: both arms, fusion, the rules, the matched terms."""
    stages = hit.stages
    rules = list(hit.rules)
    if not result.relevant:
        rules.append("relevance_gate")  # the gate would refuse to answer from these results
    return {
        "keyword_rank": stages.get("keyword_rank"),
        "keyword_score": stages.get("keyword_score"),
        "dense_rank": stages.get("dense_rank"),
        "dense_score": stages.get("dense_score"),
        "fused_rank": hit.fused_rank,
        "fused_score": stages.get("fused_score"),
        "rerank_score": stages.get("rerank_score"),
        "rules": rules,
        "matched_terms": matched_terms(tokenizer, query, hit.chunk.text),
    }


def result_explanation(result: RetrievalResult) -> dict[str, Any]:
    """The query-level part: the fusion's weights and rules, the gate's values."""
    explain = dict(result.explain)
    fusion = explain.get("fusion")
    if is_dataclass(fusion) and not isinstance(fusion, type):
        explain["fusion"] = asdict(fusion)
    return explain
