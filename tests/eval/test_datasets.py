"""The evaluation tasks read from ../shared/data (RAG_EVAL_DATA_DIR)."""

from __future__ import annotations

import json

import pytest

from eval.datasets import data_dir, load_task, xquad_split

pytestmark = pytest.mark.unit

needs_data = pytest.mark.skipif(
    not (data_dir() / "xquad" / "xquad.en.json").is_file(), reason="evaluation data not present"
)


@needs_data
def test_cross_lingual_task_pairs_arabic_questions_with_english_gold():
    english = load_task("xquad-en-en")
    cross = load_task("xquad-ar-en")

    assert cross.paragraphs == english.paragraphs
    assert len(cross.questions) == len(english.questions) == 1190
    assert [q.id for q in cross.questions] == [q.id for q in english.questions]
    assert [q.gold for q in cross.questions] == [q.gold for q in english.questions]
    assert all(any("\u0600" <= ch <= "\u06ff" for ch in q.text) for q in cross.questions[:50])


@needs_data
@pytest.mark.parametrize(("task", "paragraphs"), [("xquad-ar-ar", 240), ("arcd-test", 234)])
def test_every_question_has_a_gold_paragraph_of_its_task(task, paragraphs):
    loaded = load_task(task)

    assert len(loaded.paragraphs) == paragraphs
    assert all(q.gold <= loaded.paragraphs.keys() for q in loaded.questions)
    # Gold paragraphs contain a gold answer: ids point at the right text.
    assert sum(
        any(a in loaded.paragraphs[next(iter(q.gold))] for a in q.answers) for q in loaded.questions
    ) >= 0.95 * len(loaded.questions)


def test_data_dir_is_overridable_and_missing_files_say_what_to_set(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_EVAL_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="RAG_EVAL_DATA_DIR"):
        load_task("arcd-test")
    with pytest.raises(ValueError, match="unknown task"):
        load_task("squad")


def test_identical_paragraphs_become_one_retrievable_unit(tmp_path, monkeypatch):
    same = "A paragraph that appears twice in the file."
    article = {
        "paragraphs": [
            {"context": same, "qas": [{"id": "q1", "question": "first?", "answers": []}]},
            {"context": same, "qas": [{"id": "q2", "question": "second?", "answers": []}]},
        ]
    }
    (tmp_path / "arcd").mkdir()
    (tmp_path / "arcd" / "arcd-test.json").write_text(json.dumps({"data": [article]}))
    monkeypatch.setenv("RAG_EVAL_DATA_DIR", str(tmp_path))

    task = load_task("arcd-test")

    assert list(task.paragraphs) == ["arcd.test:0:0"]
    assert [q.gold for q in task.questions] == [frozenset({"arcd.test:0:0"})] * 2


@needs_data
def test_english_questions_over_the_arabic_paragraphs():
    arabic = load_task("xquad-ar-ar")
    cross = load_task("xquad-en-ar")

    assert cross.paragraphs == arabic.paragraphs
    assert [q.gold for q in cross.questions] == [q.gold for q in arabic.questions]
    assert not any("\u0600" <= ch <= "\u06ff" for q in cross.questions[:50] for ch in q.text)


@needs_data
def test_the_xquad_dev_split_is_fixed_whole_articles_and_disjoint():
    task = load_task("xquad-en-en")
    dev, rest = xquad_split(task)
    again, _ = xquad_split(load_task("xquad-ar-en"))

    assert (len(dev), len(rest)) == (322, 868)
    assert [q.id for q in dev] == [q.id for q in again]  # the same questions in every language
    assert not {q.id for q in dev} & {q.id for q in rest}

    def article(q):
        return next(iter(q.gold)).split(":")[1]

    assert not {article(q) for q in dev} & {article(q) for q in rest}
    assert len({article(q) for q in dev}) == 14
