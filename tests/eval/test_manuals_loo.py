"""Leave-one-manual-out's cached recalls (eval/manuals_loo.py) with a second dense arm: the
recall it scores is the one /search fuses, and recalls asked with and without it are cached
apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import load_settings
from app.retrieval.hybrid import Recall
from eval import manuals_loo
from eval.fusion_families import truncated
from eval.manual_questions import KNOWN_SOURCES, ManualQuestion, ManualSource

pytestmark = pytest.mark.unit


def _dense(recall: Recall, ids: list[str], second: bool = True) -> Recall:
    """The dense list `ids`, each with a similarity falling with its rank."""
    for rank, chunk_id in enumerate(ids, start=1):
        candidate = recall.candidate(chunk_id)
        candidate.dense_rank, candidate.dense_score = rank, 1.0 - rank / 1000
        if second:
            candidate.second_dense_rank = rank
        recall.dense_ids.append(chunk_id)
    return recall


def test_fusion_reads_the_dense_list_search_fused_and_the_deep_pool_after_it() -> None:
    # Asked four times deeper, the two arms' RRF puts chunks both arms rank low ahead of one
    # that only one arm ranks high ("only-searched"); /search, asking 30, never saw them.
    deep = _dense(Recall(), [f"deep{i}" for i in range(120)])
    keyword_only = deep.candidate("keyword-hit")  # found by BM25 only, deep
    keyword_only.keyword_rank, keyword_only.keyword_score = 1, 9.0
    deep.keyword_ids.append("keyword-hit")
    searched_ids = ["only-searched", "keyword-hit", *[f"deep{i}" for i in range(28)]]
    searched = _dense(Recall(), searched_ids)

    merged = manuals_loo.with_searched_dense_head(deep, searched, depth=30)

    assert truncated(merged, 30, 30).dense_ids == searched_ids
    assert merged.dense_ids[30:] == [f"deep{i}" for i in range(28, 120)]
    assert merged.candidates["only-searched"].dense_score == pytest.approx(0.999)
    # BM25's evidence stays; the dense arm's is /search's.
    assert merged.candidates["keyword-hit"].keyword_score == 9.0
    assert merged.candidates["keyword-hit"].dense_rank == 2


def test_recalls_asked_with_a_second_arm_are_cached_apart_from_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manual = tmp_path / "manual.pdf"
    manual.write_bytes(b"%PDF-1.4 a manual")
    source = ManualSource("manual.pdf", manual, "some-doc")
    monkeypatch.setitem(KNOWN_SOURCES, "some-manual", source)
    questions = [ManualQuestion("q1", "some-manual", "How do I print?", ("print",))]
    today = load_settings(_env_file=None, data_dir=tmp_path, env="development")

    def key(**update: str) -> str:
        return manuals_loo._cache_key("some-manual", questions, today.model_copy(update=update))

    assert len({key(), key(second_embedding="e5"), key(english_embedding="minilm")}) == 3
    assert key(second_embedding="e5", english_embedding="minilm") != key(second_embedding="e5")
