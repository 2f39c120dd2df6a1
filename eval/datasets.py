"""Retrieval tasks from the SQuAD-format evaluation data (read where it lives, never copied).

A task is a set of paragraphs with stable ids and questions whose gold paragraph ids are known.
Tasks: XQuAD en->en, ar->ar, ar->en (Arabic questions over the English paragraphs; the XQuAD files
are parallel), en->ar (English questions over the Arabic paragraphs) and ARCD test; ARCD train is
for tuning only. Where the data is: `data_dir()`.

Honest tuning: fusion is tuned on ARCD train and on the questions of a fixed, seeded
dev split of XQuAD's articles (`xquad_split`), and reported on ARCD test and the XQuAD remainder.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

CHECKOUT = Path(__file__).resolve().parents[1]
# The data's folder, relative to a folder above the checkout: ../shared/data beside it, or higher.
SHARED_DATA = Path("shared") / "data"
TASKS = ("xquad-en-en", "xquad-ar-ar", "xquad-ar-en", "xquad-en-ar", "arcd-test")
TUNING_TASKS = ("arcd-train",)
# The XQuAD dev split: a seeded draw of whole articles (all their paragraphs' questions), so no
# question of a tuned-on paragraph is ever reported as held out.
XQUAD_DEV_SEED = 2026
XQUAD_DEV_ARTICLES = 14  # of 48


@dataclass(frozen=True)
class Question:
    """One question, its gold paragraph ids and its gold answer spans."""

    id: str
    text: str
    gold: frozenset[str]
    answers: tuple[str, ...]


@dataclass(frozen=True)
class RetrievalTask:
    """Paragraphs (id -> text, in file order) and the questions asked over them."""

    name: str
    paragraphs: dict[str, str]
    questions: list[Question]


def data_dir() -> Path:
    """Where the evaluation data lives: RAG_EVAL_DATA_DIR, else the nearest shared/data in a
    folder above the checkout, else above the local repository it was cloned from."""
    configured = os.environ.get("RAG_EVAL_DATA_DIR")
    return Path(configured) if configured else found_data_dir(CHECKOUT)


@cache
def found_data_dir(checkout: Path) -> Path:
    """The nearest `shared/data` above `checkout` or above its origin (a clone made elsewhere on
    the same machine); `../shared/data` beside the checkout when there is none, so the error
    names the expected place."""
    for start in (checkout, *clone_origin(checkout)):
        for folder in start.parents:
            if (folder / SHARED_DATA).is_dir():
                return folder / SHARED_DATA
    return checkout.parent / SHARED_DATA


def clone_origin(checkout: Path) -> list[Path]:
    """The local repository `checkout` was cloned from, if its origin is a path on this machine."""
    try:
        url = subprocess.run(
            ["git", "-C", str(checkout), "config", "--get", "remote.origin.url"],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return []
    path = Path(url.removeprefix("file://"))
    return [path.resolve()] if url and path.is_absolute() and path.is_dir() else []


def _read(relative: str, root: Path | None) -> list[dict[str, Any]]:
    path = (root or data_dir()) / relative
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; set RAG_EVAL_DATA_DIR to the data folder")
    articles: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["data"]
    return articles


def _squad_task(
    name: str,
    prefix: str,
    paragraph_articles: list[dict[str, Any]],
    question_articles: list[dict[str, Any]] | None = None,
) -> RetrievalTask:
    """Paragraph (a, p) of one file is gold for the questions of paragraph (a, p) of the other."""
    question_articles = question_articles if question_articles is not None else paragraph_articles
    paragraphs: dict[str, str] = {}
    by_text: dict[str, str] = {}
    questions: list[Question] = []
    for a, (article, q_article) in enumerate(
        zip(paragraph_articles, question_articles, strict=True)
    ):
        for p, (paragraph, q_paragraph) in enumerate(
            zip(article["paragraphs"], q_article["paragraphs"], strict=True)
        ):
            context = paragraph["context"]
            # An identical paragraph appearing twice is one retrievable unit, not two.
            pid = by_text.setdefault(context, f"{prefix}:{a}:{p}")
            paragraphs.setdefault(pid, context)
            for qa in q_paragraph["qas"]:
                answers = tuple(answer["text"] for answer in qa.get("answers", []))
                questions.append(Question(str(qa["id"]), qa["question"], frozenset({pid}), answers))
    return RetrievalTask(name, paragraphs, questions)


def load_task(name: str, root: Path | None = None) -> RetrievalTask:
    """One of TASKS, read from the data directory."""
    if name == "xquad-en-en":
        return _squad_task(name, "xquad.en", _read("xquad/xquad.en.json", root))
    if name == "xquad-ar-ar":
        return _squad_task(name, "xquad.ar", _read("xquad/xquad.ar.json", root))
    if name == "xquad-ar-en":
        english = _read("xquad/xquad.en.json", root)
        arabic = _read("xquad/xquad.ar.json", root)
        task = _squad_task(name, "xquad.en", english, arabic)
        _check_parallel(english, arabic)
        return task
    if name == "xquad-en-ar":
        english = _read("xquad/xquad.en.json", root)
        arabic = _read("xquad/xquad.ar.json", root)
        task = _squad_task(name, "xquad.ar", arabic, english)
        _check_parallel(english, arabic)
        return task
    if name == "arcd-test":
        return _squad_task(name, "arcd.test", _read("arcd/arcd-test.json", root))
    if name == "arcd-train":
        return _squad_task(name, "arcd.train", _read("arcd/arcd-train.json", root))
    raise ValueError(f"unknown task {name!r}; expected one of {', '.join(TASKS + TUNING_TASKS)}")


def xquad_dev_articles(articles: int = 48) -> frozenset[int]:
    """Article indexes of the XQuAD dev split (fixed seed; the same in every language)."""
    return frozenset(random.Random(XQUAD_DEV_SEED).sample(range(articles), XQUAD_DEV_ARTICLES))


def xquad_split(task: RetrievalTask) -> tuple[list[Question], list[Question]]:
    """An XQuAD task's questions as (dev, held out), by the article of their gold paragraph."""
    dev_articles = xquad_dev_articles()
    dev: list[Question] = []
    rest: list[Question] = []
    for question in task.questions:
        article = int(next(iter(question.gold)).split(":")[1])
        (dev if article in dev_articles else rest).append(question)
    return dev, rest


def _check_parallel(english: list[dict[str, Any]], arabic: list[dict[str, Any]]) -> None:
    """The cross-lingual gold relies on the files being parallel: verify, don't assume."""
    english_ids = [qa["id"] for a in english for p in a["paragraphs"] for qa in p["qas"]]
    arabic_ids = [qa["id"] for a in arabic for p in a["paragraphs"] for qa in p["qas"]]
    if english_ids != arabic_ids:
        raise ValueError("xquad.en.json and xquad.ar.json are not parallel (question ids differ)")
