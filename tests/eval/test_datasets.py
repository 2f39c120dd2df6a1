"""The evaluation tasks, read where the data lives (RAG_EVAL_DATA_DIR, else shared/data above)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from eval.datasets import data_dir, found_data_dir, load_task, xquad_split
from tests.availability import needs

pytestmark = pytest.mark.unit

needs_data = needs(
    (data_dir() / "xquad" / "xquad.en.json").is_file(), "evaluation data not present"
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


def test_the_data_is_found_in_the_nearest_shared_data_above_the_checkout(tmp_path: Path) -> None:
    data = tmp_path / "work" / "shared" / "data"
    data.mkdir(parents=True)
    beside = tmp_path / "work" / "checkout"  # ../shared/data
    worktree = tmp_path / "work" / "worktrees" / "branch"  # ../../shared/data
    beside.mkdir()
    worktree.mkdir(parents=True)

    assert found_data_dir(beside) == data
    assert found_data_dir(worktree) == data


def test_a_clone_made_elsewhere_finds_the_data_above_the_repository_it_was_cloned_from(
    tmp_path: Path,
) -> None:
    data = tmp_path / "work" / "shared" / "data"
    data.mkdir(parents=True)
    source = tmp_path / "work" / "main"
    subprocess.run(["git", "init", "-q", str(source)], check=True)
    clone = tmp_path / "ci" / "somewhere" / "clone"
    clone.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "remote", "add", "origin", str(source)], check=True)

    assert found_data_dir(clone) == data


def test_without_shared_data_anywhere_the_expected_place_is_beside_the_checkout(
    tmp_path: Path,
) -> None:
    checkout = tmp_path / "lonely" / "checkout"
    checkout.mkdir(parents=True)

    assert found_data_dir(checkout) == tmp_path / "lonely" / "shared" / "data"


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
