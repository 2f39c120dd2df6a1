"""Relevance gate: say "nothing relevant" before an LLM is asked to answer from noise.

The signal is the best dense cosine similarity among the candidates. Similarity scales differ
per embedding model (e5 scores sit in a narrow ~0.7-0.9 band, USE spreads wider), so the
threshold is looked up per model id; `RAG_RELEVANCE_THRESHOLD` overrides it. Values were
calibrated by bench/gate_calibration.py on XQuAD (en, ar) and ARCD: questions whose gold
paragraph is indexed vs. the same questions with it removed (numbers in bench/README.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

logger = logging.getLogger(__name__)

# model_id -> minimum best-candidate cosine similarity. Keys must match Embedder.model_id.
# Each value keeps 95% of answerable questions (XQuAD en+ar, ARCD pooled); a refused answerable
# question costs more than an LLM call that ends in "not in the documents".
CALIBRATED_THRESHOLDS: dict[str, float] = {
    # kept 95.0%; refused 30.3% of other-corpus questions (the model's own question vectors)
    "use:universal-sentence-encoder-multilingual-3": 0.178,
    # kept 95.0%; refused 37.6% with the gold paragraph removed, 86.0% of other-corpus questions
    "e5:multilingual-e5-small-q4": 0.824,
}


# The same models with centred questions (RAG_USE_QUESTION_CENTRING, app/providers/
# use_question_mean.py): kept 95.0%; refused 9.1% with the gold paragraph removed, 32.7% of
# other-corpus questions.
CENTRED_QUESTION_THRESHOLDS: dict[str, float] = {
    "use:universal-sentence-encoder-multilingual-3": 0.172,
}


_warned: set[str] = set()


def threshold_for(
    model_id: str, override: float | None, centred_questions: bool = False
) -> float | None:
    """The threshold for this embedding model (and question form); None when neither
    calibrated nor configured."""
    if override is not None:
        return override
    table = CENTRED_QUESTION_THRESHOLDS if centred_questions else CALIBRATED_THRESHOLDS
    for key, value in table.items():
        if model_id == key or model_id.startswith(key + "@"):
            return value
    if model_id in _warned:
        return None
    _warned.add(model_id)
    logger.warning(
        "no calibrated relevance threshold for embedding model %r; the gate only refuses "
        "when nothing matched (set RAG_RELEVANCE_THRESHOLD)",
        model_id,
    )
    return None


@dataclass(frozen=True)
class GateDecision:
    """Whether retrieval found something relevant enough to answer from, and why."""

    relevant: bool
    reason: str


def judge(
    best_similarity: float | None,
    threshold: float | None,
    exact_terms_found: list[str],
    has_candidates: bool,
) -> GateDecision:
    """Decide relevance: an exact-match hit, or a dense similarity at or above the threshold."""
    if not has_candidates:
        return GateDecision(False, "no chunk matched the question")
    if exact_terms_found:
        return GateDecision(True, "exact match: " + ", ".join(repr(t) for t in exact_terms_found))
    if best_similarity is None:
        return GateDecision(True, "keyword match (no dense score to gate on)")
    if threshold is None:
        return GateDecision(True, f"no calibrated threshold; best similarity {best_similarity:.3f}")
    if best_similarity >= threshold:
        return GateDecision(
            True, f"best similarity {best_similarity:.3f} >= threshold {threshold:.3f}"
        )
    return GateDecision(False, f"best similarity {best_similarity:.3f} < threshold {threshold:.3f}")
