"""The relevance gate's decision and its per-model thresholds."""

from __future__ import annotations

import pytest

from app.retrieval.gate import CALIBRATED_THRESHOLDS, judge, threshold_for

pytestmark = pytest.mark.unit


def test_thresholds_are_per_model_and_overridable() -> None:
    use = "use:universal-sentence-encoder-multilingual-3"
    assert threshold_for(use, None) == CALIBRATED_THRESHOLDS[use]
    assert threshold_for(use, 0.5) == 0.5
    # Centred questions (RAG_USE_QUESTION_CENTRING) were calibrated on their own.
    assert threshold_for(use, None, centred_questions=True) == pytest.approx(0.172)
    assert threshold_for(use, None) == pytest.approx(0.178)
    # e5 scores sit in a narrow high band: its threshold is far from USE's.
    assert threshold_for("e5:multilingual-e5-small-q4", None) == pytest.approx(0.824)
    assert threshold_for("some:unknown-model", None) is None
    assert threshold_for("some:unknown-model", 0.2) == 0.2


def test_decisions() -> None:
    assert not judge(None, 0.3, [], has_candidates=False).relevant
    assert judge(0.31, 0.3, [], has_candidates=True).relevant
    below = judge(0.29, 0.3, [], has_candidates=True)
    assert not below.relevant and "0.290 < threshold 0.300" in below.reason
    exact = judge(0.01, 0.3, ["SR-33"], has_candidates=True)
    assert exact.relevant and "SR-33" in exact.reason
    assert judge(0.01, None, [], has_candidates=True).relevant  # uncalibrated: never refuses
    assert judge(None, 0.3, [], has_candidates=True).relevant  # keyword-only mode
