"""Which manual questions the answer evaluation asks: all development manuals, evenly, and the
old five-manual sample unchanged."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from eval import manual_questions as mq
from eval.manual_sample import sample_manual_questions, split_pool, spread_sample
from eval.retrieval import RESULTS_DIR
from tests.availability import needs

pytestmark = pytest.mark.unit

DEVELOPMENT = set(mq.ALL_SOURCES)
INSTALLED = not mq.missing_sources(mq.ALL_SOURCES)


@needs(INSTALLED, "the development manuals' PDFs (eval/manuals/README.md)")
def test_the_development_sample_asks_every_development_manual_equally_and_never_r_intro() -> None:
    for split in ("tuning", "test"):
        questions = sample_manual_questions(split, 45, 2026, "development")

        per_manual = Counter(q.manual for q in questions)
        assert set(per_manual) == DEVELOPMENT and len(DEVELOPMENT) == 15
        assert set(per_manual.values()) == {3}
        assert "R-intro" not in per_manual


@needs(INSTALLED, "the development manuals' PDFs (eval/manuals/README.md)")
def test_forty_questions_spread_over_fifteen_manuals_ask_two_or_three_of_each() -> None:
    questions = sample_manual_questions("test", 40, 2026, "development")

    assert len(questions) == 40
    assert sorted(Counter(q.manual for q in questions).values()) == [2] * 5 + [3] * 10
    assert questions == sample_manual_questions("test", 40, 2026, "development")


@needs(INSTALLED, "the development manuals' PDFs (eval/manuals/README.md)")
def test_the_halves_of_the_wider_manuals_never_share_a_question_and_split_them_evenly() -> None:
    questions = mq.load_questions(sources=mq.ALL_SOURCES)
    tuning, test = split_pool(questions, "tuning"), split_pool(questions, "test")

    assert not {q.id for q in tuning} & {q.id for q in test}
    assert len(tuning) + len(test) == len(questions)
    for manual in mq.DEV_WIDE_SOURCES:
        halves = (sum(q.manual == manual for q in part) for part in (tuning, test))
        assert abs(next(halves) - next(halves)) <= 1


@needs(not mq.missing_sources(), "the first five manuals' PDFs (eval/manuals/README.md)")
def test_the_halved_sample_is_the_one_the_earlier_runs_asked() -> None:
    recorded = json.loads(
        (RESULTS_DIR / "answers-manuals-test-llamacpp-best-last-t1.json").read_text("utf-8")
    )
    asked = [row["id"] for row in recorded["answers"]]

    chosen = sample_manual_questions("test", 40, 2026, "halved")

    assert sorted(q.id for q in chosen) == sorted(asked)


def test_a_manual_with_fewer_questions_than_its_share_gives_all_it_has() -> None:
    pool = [
        mq.ManualQuestion(f"{m}-{i}", m, f"Question {i}?", ("x",), "test")
        for m, n in (("a", 1), ("b", 6), ("c", 6))
        for i in range(n)
    ]

    chosen = spread_sample(pool, 9, seed=1)

    assert Counter(q.manual for q in chosen) == {"a": 1, "b": 4, "c": 4}
