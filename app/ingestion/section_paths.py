"""Section paths for chunks: which chapter › section › subsection a piece of text sits under.

Loaders mark where headings start (`HeadingMark`: offset in the page text, level, title): PDFs
from their outline (a bookmark points at a page and a height on it: app/ingestion/pdf_outline.py),
DOCX from heading paragraph styles, Markdown from `#` lines. `SectionPaths` follows the marks
through the pages in order, so a section that crosses a page break keeps its path on the next
page, and gives each chunk the path of the section most of its text belongs to (the chunker cuts
at section starts, so that is the section the chunk starts in, bare headings aside).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.domain import SECTION_SEPARATOR, HeadingMark, Page
from app.text.sections import SECTION_NUMBER

_WORD = re.compile(r"\w+")
_MARKDOWN_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)
# A path longer than this is cut from the top: the nearest headings say the most.
MAX_PATH_CHARS = 300
MAX_LEVEL = 9


def clean_title(title: str) -> str:
    """A heading title for the path: one line, without its section number ("2.1", "A.3")."""
    flat = " ".join(title.split())
    bare = SECTION_NUMBER.sub("", flat, count=1).strip()
    return bare or flat


def title_pattern(title: str) -> re.Pattern[str] | None:
    """The title's words in order, anything but a word between them (line breaks, hyphens)."""
    found = _WORD.findall(title)
    if not found:
        return None
    return re.compile(r"\W+".join(re.escape(w) for w in found), re.IGNORECASE)


def locate_headings(text: str, titles: Sequence[tuple[int, str]]) -> tuple[HeadingMark, ...]:
    """Marks for (level, title) headings known to start in `text`, in that order: each is found
    after the previous one; one not found is placed where the previous one is (0 for the first),
    so the order of the sections, which is what chunks need, is kept."""
    marks: list[HeadingMark] = []
    position = 0
    for level, title in titles:
        pattern = title_pattern(title)
        match = pattern.search(text, position) if pattern else None
        if match is not None:
            position = match.start()
        marks.append(HeadingMark(position, min(max(level, 1), MAX_LEVEL), clean_title(title)))
    return tuple(marks)


def markdown_headings(text: str) -> tuple[HeadingMark, ...]:
    """ATX headings (`# Title`, `## Section`) outside fenced code blocks."""
    fences = [m.start() for m in _FENCE.finditer(text)]
    marks = []
    for match in _MARKDOWN_HEADING.finditer(text):
        inside_fence = sum(1 for f in fences if f < match.start()) % 2 == 1
        title = clean_title(match.group(2))
        if not inside_fence and title:
            marks.append(HeadingMark(match.start(), len(match.group(1)), title))
    return tuple(marks)


def _joined(path: Sequence[str]) -> str:
    parts = list(path)
    while len(parts) > 1 and len(SECTION_SEPARATOR.join(parts)) > MAX_PATH_CHARS:
        parts.pop(0)
    return SECTION_SEPARATOR.join(parts)[:MAX_PATH_CHARS]


class SectionPaths:
    """Walks a document's pages in order and names the section path of each chunk."""

    def __init__(self) -> None:
        self._stack: list[str] = []  # titles by level - 1; "" where a level was skipped

    def _push(self, mark: HeadingMark) -> None:
        del self._stack[mark.level - 1 :]
        self._stack.extend([""] * (mark.level - 1 - len(self._stack)))
        self._stack.append(mark.title)

    def _path(self) -> str:
        return _joined([title for title in self._stack if title])

    def enter(self, page: Page) -> list[tuple[int, str]]:
        """Start a page: its regions as (start offset, path), the first at 0 continuing the
        previous page's section. Call once per page, in page order."""
        regions = [(0, self._path())]
        for mark in sorted(page.headings, key=lambda m: m.offset):
            self._push(mark)
            path = self._path()
            if regions[-1][0] == mark.offset:
                regions[-1] = (mark.offset, path)
            else:
                regions.append((mark.offset, path))
        return regions


def path_for_span(regions: Sequence[tuple[int, str]], start: int, end: int) -> str:
    """The path of the region holding most of [start, end) (the later one on a tie)."""
    best, best_overlap = regions[0][1], -1
    for index, (region_start, path) in enumerate(regions):
        region_end = regions[index + 1][0] if index + 1 < len(regions) else end
        overlap = min(end, region_end) - max(start, region_start)
        if overlap >= best_overlap and overlap >= 0:
            best, best_overlap = path, overlap
    return best
