"""Offset-based recursive splitting with an overlap that is actually delivered.

LangChain's RecursiveCharacterTextSplitter builds overlap out of whole units (lines,
sentences), so the overlap it delivers jumps between 0 and several lines. Here the text is
first cut into contiguous *cores* of at most `size - overlap` characters at the best available
boundary (paragraph, line, sentence, word, then a hard cut); each chunk is then its core
extended backwards by `overlap` characters, moved forward to the next word start by at most
`overlap_tolerance(overlap)` characters. Every chunk stays within `size`, and
`text[span.start:span.end]` is the chunk text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

# Boundaries in order of preference; the separator stays at the end of the piece before it.
TEXT_SEPARATORS: tuple[str, ...] = (
    r"\n[ \t]*\n\s*",  # paragraph
    r"\n",  # line
    r"(?<=[.!?؟。])\s+",  # sentence
    r"\s+",  # word
)
# Python: split before top-level definitions (with their decorators), then methods.
PYTHON_SEPARATORS: tuple[str, ...] = (
    r"\n(?=(?:@|class |def |async def ))",
    r"\n(?=[ \t]+(?:@|def |async def ))",
    r"\n[ \t]*\n\s*",
    r"\n",
    r"\s+",
)
# Re-indented JSON: members of the top-level value, then of the next level, then lines.
JSON_SEPARATORS: tuple[str, ...] = (r"\n(?=  \S)", r"\n(?=    \S)", r"\n", r"\s+")
TABLE_SEPARATORS: tuple[str, ...] = (r"\n", r"\s+")
OVERLAP_SNAP_MAX = 16


@dataclass(frozen=True)
class Span:
    """A chunk as character offsets into the page text."""

    start: int
    end: int


def overlap_tolerance(overlap: int) -> int:
    """How far a chunk start may move forward to reach a word start; overlap >= overlap - this."""
    return min(OVERLAP_SNAP_MAX, overlap // 4)


@lru_cache(maxsize=64)
def separators_for(language: str | None) -> tuple[str, ...]:
    """Boundary regexes for a language name (LangChain's names); prose separators otherwise."""
    if language is None:
        return TEXT_SEPARATORS
    if language == "python":
        return PYTHON_SEPARATORS
    if language == "json":
        return JSON_SEPARATORS
    # Imported here: langchain_text_splitters costs about a second to import.
    from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

    try:
        lang = Language(language)
    except ValueError:
        return (r"\n[ \t]*\n\s*", r"\n", r"\s+")
    found = RecursiveCharacterTextSplitter.get_separators_for_language(lang)
    # Drop LangChain's single-space and empty fallbacks: words and hard cuts come last anyway.
    return (*(sep for sep in found if sep not in {"", " "}), r"\s+")


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _boundaries(text: str, start: int, end: int, pattern: str) -> list[int]:
    """Positions inside (start, end) where `pattern` allows a cut, after leading whitespace."""
    cuts: list[int] = []
    for match in _compiled(pattern).finditer(text, start, end):
        matched = match.group()
        cut = match.start() + (len(matched) - len(matched.lstrip()))
        if start < cut < end and (not cuts or cut > cuts[-1]):
            cuts.append(cut)
    return cuts


def split_cores(
    text: str, start: int, end: int, limit: int, separators: Sequence[str]
) -> list[Span]:
    """Cut text[start:end] into contiguous spans of at most `limit` characters."""
    if end - start <= limit:
        return [Span(start, end)]
    for level, pattern in enumerate(separators):
        cuts = _boundaries(text, start, end, pattern)
        if cuts:
            return _merge(text, [start, *cuts, end], limit, separators[level + 1 :])
    return [Span(s, min(s + limit, end)) for s in range(start, end, limit)]


def _merge(text: str, edges: list[int], limit: int, finer: Sequence[str]) -> list[Span]:
    """Greedily join consecutive pieces up to `limit`; split oversized pieces more finely."""
    spans: list[Span] = []
    current = edges[0]
    for piece_start, piece_end in pairwise(edges):
        if piece_end - current <= limit:
            continue
        if piece_start > current:
            spans.append(Span(current, piece_start))
        if piece_end - piece_start > limit:
            spans.extend(split_cores(text, piece_start, piece_end, limit, finer))
            current = piece_end
        else:
            current = piece_start
    if edges[-1] > current:
        spans.append(Span(current, edges[-1]))
    return spans


def _snap_to_word_start(text: str, target: int, latest: int) -> int:
    """The first word start in [target, latest], or `target` when a long word covers it."""
    for position in range(target, latest + 1):
        if position == 0 or (text[position - 1].isspace() and not text[position].isspace()):
            return position
    return target


def add_overlap(text: str, cores: Sequence[Span], overlap: int) -> list[Span]:
    """Extend each core after the first backwards by `overlap` characters (word-snapped)."""
    if overlap <= 0 or not cores:
        return list(cores)
    tolerance = overlap_tolerance(overlap)
    spans = [cores[0]]
    for previous, core in pairwise(cores):
        # Never reach back past the previous core: the overlap is shared with one neighbour.
        target = max(core.start - overlap, previous.start)
        latest = min(target + tolerance, core.start - 1)
        spans.append(Span(_snap_to_word_start(text, target, latest), core.end))
    return spans


def split_text(
    text: str, size: int, overlap: int, separators: Sequence[str] = TEXT_SEPARATORS
) -> list[Span]:
    """Split `text` into spans of at most `size` characters sharing `overlap` with neighbours."""
    if overlap >= size:
        raise ValueError("overlap must be smaller than size")
    cores = split_cores(text, 0, len(text), size - overlap, separators)
    return add_overlap(text, cores, overlap)
