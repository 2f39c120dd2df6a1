"""A PDF's outline (bookmarks) as section starts: which page each entry opens, how deep it sits,
and where on the page its heading begins.

An entry's destination names a page and, for `/XYZ left top zoom` and `/FitH top`, the height
the viewer scrolls to: the heading's top. `TextTops` records the height each piece of a page's
text is printed at (PDFium's glyph origins, or pypdf's text visitor where PDFium cannot read the
page), so that height can be turned into a place in the page's text (the first words printed
below it): the heading line, its number included, even where the title's
words also occur earlier on the page (a mention above the heading). Without a usable height the
title's first occurrence after the previous heading is taken, as the loader always did; a title
the text does not hold keeps the previous heading's place, so the sections stay in order.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pypdf import PdfReader

from app.domain import HeadingMark
from app.ingestion.section_paths import MAX_LEVEL, clean_title, title_pattern

log = logging.getLogger(__name__)

# A heading's baseline sits below the destination's top by about its font size; text this far
# above the top (points) still counts as below it (viewers and TeX put the top a little low).
TOP_SLACK = 4.0
# The words read after the destination's top that must be found in the page text to place it.
PROBE_WORDS = 6
# Pieces whose baselines differ by less than this (points) are on one line.
LINE_TOLERANCE = 1.0
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class OutlineEntry:
    """One bookmark: 0-based page index, depth (1: top level), title, destination top (or None)."""

    page: int
    level: int
    title: str
    top: float | None = None


def read_outline(reader: PdfReader) -> list[OutlineEntry]:
    """The outline's entries in outline order; entries whose destination cannot be resolved (a
    missing page, a dangling named destination) are skipped, never fatal."""
    entries: list[OutlineEntry] = []

    def walk(items: list[Any], level: int) -> None:
        for item in items:
            if isinstance(item, list):  # the children of the entry before it
                walk(item, level + 1)
                continue
            try:
                index = reader.get_destination_page_number(item)
            except Exception:  # a dangling bookmark must not lose the document
                continue
            if index is None or index < 0:
                continue
            entries.append(OutlineEntry(index, level, str(item.title or ""), _top_of(item)))

    try:
        walk(reader.outline, 1)
    except Exception:
        log.warning("unreadable outline; page roles from layout only, no section paths")
    return entries


def _top_of(destination: Any) -> float | None:
    """The destination's top coordinate (/XYZ, /FitH, /FitBH), None for other fits or junk."""
    try:
        if destination.typ in ("/XYZ", "/FitH", "/FitBH"):
            top = destination.top
            return float(top) if top is not None else None
    except Exception:  # a malformed destination array: place the entry by its title only
        return None
    return None


def entries_by_page(entries: Sequence[OutlineEntry]) -> dict[int, list[OutlineEntry]]:
    """0-based page index -> the entries that open on it, in outline order."""
    by_page: dict[int, list[OutlineEntry]] = {}
    for entry in entries:
        by_page.setdefault(entry.page, []).append(entry)
    return by_page


def covering_titles(entries: Sequence[OutlineEntry], page_count: int) -> dict[int, list[str]]:
    """0-based page index -> the titles of the entries whose range covers the page: from the
    entry's page up to the page before the next entry at its level or above (the last page for
    the last one). An index's later pages, which no bookmark opens, are still inside it."""
    covering: dict[int, list[str]] = {}
    for position, entry in enumerate(entries):
        end = page_count - 1
        for later in entries[position + 1 :]:
            if later.level <= entry.level:
                end = max(later.page - 1, entry.page)
                break
        for page in range(entry.page, min(end, page_count - 1) + 1):
            covering.setdefault(page, []).append(entry.title)
    return covering


@dataclass
class TextTops:
    """The extracted text pieces of one page with the height they are printed at, in order."""

    pieces: list[tuple[str, float]] = field(default_factory=list)

    def add(self, text: str, height: float) -> None:
        """Record a piece of text printed with its baseline at this height (blank ones skip)."""
        if text.strip():
            self.pieces.append((text, height))

    def visit(self, text: str, cm: Sequence[float], tm: Sequence[float], *_: Any) -> None:
        """pypdf's `visitor_text`: record the piece and its baseline height on the page."""
        # The text origin (tm's translation) mapped through the current transformation.
        self.add(text, tm[4] * cm[1] + tm[5] * cm[3] + cm[5])

    def words_below(self, top: float) -> list[str]:
        """The first words of the highest line printed at or below `top` (the heading a
        destination opens), read on in extraction order."""
        below = [height for _, height in self.pieces if height <= top + TOP_SLACK]
        if not below:
            return []
        line = max(below)
        words: list[str] = []
        for text, height in self.pieces:
            if words or abs(height - line) <= LINE_TOLERANCE:
                words.extend(_WORD.findall(text))
                if len(words) >= PROBE_WORDS:
                    break
        return words[:PROBE_WORDS]


def _offset_of_words(text: str, words: Sequence[str], start: int) -> int | None:
    """Where the words, in order with anything but a word between them, start in text[start:]."""
    if not words:
        return None
    pattern = re.compile(r"\W+".join(re.escape(w) for w in words), re.IGNORECASE)
    match = pattern.search(text, start)
    return match.start() if match else None


def place_headings(
    text: str, entries: Sequence[OutlineEntry], tops: TextTops | None = None
) -> tuple[HeadingMark, ...]:
    """Marks for the entries opening on a page, in outline order and never moving backwards.

    Each is placed where the words printed at its destination's top are found (when the page's
    text positions are known: the heading line, its number included), else at its title's first
    occurrence after the previous mark, else where the previous mark is (0 for the first).
    """
    marks: list[HeadingMark] = []
    position = 0
    for entry in entries:
        anchor = None
        if tops is not None and entry.top is not None:
            anchor = _offset_of_words(text, tops.words_below(entry.top), position)
        if anchor is not None:
            position = anchor
        else:
            pattern = title_pattern(entry.title)
            match = pattern.search(text, position) if pattern else None
            position = match.start() if match else position
        level = min(max(entry.level, 1), MAX_LEVEL)
        marks.append(HeadingMark(position, level, clean_title(entry.title)))
    return tuple(marks)
