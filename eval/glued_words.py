"""How many of a text's letters sit in words run together ("Justlikeanyothermodern...").

A PDF loader that misses word spaces fails silently: the pages still have text, but the keyword
index never matches a glued token and the embedder reads noise. Two indicators, both shares of
letters (so long pages weigh more than short ones):

- `glued_share`: letters in runs longer than LONGEST_WORD letters. Needs no reference; real
  words that long are rare in prose (R-exts: 0.1%, mostly long identifiers).
- `unknown_share`: letters in runs that are not words of a reference vocabulary, here the words
  poppler's `pdftotext -layout` (poppler-utils) reads from the same PDF. It also sees glued
  Arabic words, which are shorter than the bound above.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import unicodedata
from collections.abc import Collection
from pathlib import Path

LONGEST_WORD = 20
_LETTER_RUN = re.compile(r"[^\W\d_]+")


def letter_runs(text: str) -> list[str]:
    """The runs of letters in `text`, casefolded, without combining marks (Arabic vowel signs
    split no word) and with presentation forms folded."""
    folded = unicodedata.normalize("NFKC", text)
    bare = "".join(char for char in folded if unicodedata.category(char) != "Mn")
    return [run.casefold() for run in _LETTER_RUN.findall(bare)]


def _share(runs: list[str], counted: list[str]) -> float:
    total = sum(map(len, runs))
    return sum(map(len, counted)) / total if total else 0.0


def glued_share(text: str, longest: int = LONGEST_WORD) -> float:
    """The share of letters in runs longer than `longest` letters."""
    runs = letter_runs(text)
    return _share(runs, [run for run in runs if len(run) > longest])


def unknown_share(text: str, vocabulary: Collection[str]) -> float:
    """The share of letters in runs that are not in `vocabulary` (casefolded letter runs)."""
    runs = letter_runs(text)
    return _share(runs, [run for run in runs if run not in vocabulary])


def reference_pages(path: Path) -> list[str] | None:
    """Each page's text as `pdftotext -layout` reads it, or None when poppler-utils is absent."""
    if shutil.which("pdftotext") is None:
        return None
    done = subprocess.run(
        ["pdftotext", "-layout", "-enc", "UTF-8", str(path), "-"],
        capture_output=True,
        check=True,
        text=True,
    )
    return done.stdout.split("\f")


def reference_vocabulary(path: Path) -> set[str] | None:
    """The letter runs of the whole PDF as pdftotext reads it, or None without pdftotext."""
    pages = reference_pages(path)
    return None if pages is None else set(letter_runs("\n".join(pages)))
