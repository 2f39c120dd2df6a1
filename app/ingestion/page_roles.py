"""Page roles: which pages only point at content (contents, index, lists, bibliography, covers).

Such pages repeat the words of every heading, so they win keyword and dense matches against the
pages that actually answer; the retriever demotes them (see app/retrieval/hybrid.py). The role is
read from layout cues of the extracted text, and for PDFs from the outline (bookmarks):

- dotted leaders (`Installation ....... 12`) and lines that end in a page number;
- a high share of short lines ending in numbers (an index: `mean, 23, 45`), alphabetically
  ordered;
- a heading naming the role (`Contents`, `Index`, `List of Figures`, `References`, ...);
- an outline entry with such a title pointing at the page or covering it (`Concept index` ->
  the pages up to the next entry at its level), while a page an ordinary bookmark opens
  (`2.1 Vectors`) needs dotted leaders to lose its content role;
- near-empty pages (blank), and a short title page that opens a longer document (cover).

A page gets a role only when the cues agree; ordinary prose never does (unit-tested on synthetic
and real PDF pages).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.domain import PageRole
from app.text.sections import SECTION_NUMBER

# A title (a heading on the page or an outline entry) that names a role.
_TITLES: tuple[tuple[PageRole, re.Pattern[str]], ...] = (
    (
        "contents",
        re.compile(r"^(table of contents|contents|short contents|toc|المحتويات|فهرس المحتويات)$"),
    ),
    (
        "figures",
        re.compile(r"^list of (figures|tables|illustrations|listings)( and (figures|tables))?$"),
    ),
    ("bibliography", re.compile(r"^(bibliography|references|works cited|المراجع|قائمة المراجع)$")),
    (
        "index",
        re.compile(
            r"^((general|subject|concept|author|name|keyword|command|program|topic|alphabetical"
            r"|function|variable|environment variable|function and variable|data|option)s? )?"
            r"index$|^index of \w+( \w+)?$|^الفهرس$"
        ),
    ),
)
# A page number at the end of a line: arabic digits or a roman numeral, after a space or leader.
_ENDS_IN_PAGE = re.compile(r"(?:\s|\.)(\d{1,4}|x{0,3}(?:ix|iv|v?i{1,3}|v))\s*$")
# Dotted leaders as extracted from PDFs: ".....", ". . . .", "……", or "·····".
_LEADER = re.compile(r"(?:\.\s*){4,}|…{2,}|(?:·\s*){4,}|(?:_\s*){6,}")
# An index entry: a term followed by one or more page references (`mean, 23, 45-47`).
_INDEX_ENTRY = re.compile(
    r"^\S.{0,60}?[,\s]\s*\d{1,4}(?:[-–]\d{1,4})?(?:\s*,\s*\d{1,4}(?:[-–]\d{1,4})?)*\s*$"
)
_YEAR = re.compile(r"\b(1[6-9]\d\d|20\d\d)[a-z]?\b")
_CITATION_START = re.compile(r"^(\[\d{1,3}\]|\d{1,3}\.\s+[A-Z]|[A-Z][a-zA-Z'-]+,\s+[A-Z]\.)")
_BLANK_NOTE = re.compile(r"(intentionally|deliberately) (left )?blank", re.IGNORECASE)

# Thresholds: shares of a page's non-empty lines. Chosen so that prose, tables of figures in
# prose and numbered lists stay content (see tests/ingestion/test_page_roles.py).
MIN_LIST_LINES = 6
# The last page of a contents or index may hold a few entries only; with a heading naming the
# role (often the running header, "Concept Index 63") or strong leaders, 3 lines are a list.
MIN_TAIL_LINES = 3
STRONG_LEADER_SHARE = 0.5
LEADER_SHARE = 0.3
ENDS_IN_NUMBER_SHARE = 0.6
ENDS_IN_NUMBER_SHARE_WITH_TITLE = 0.3
INDEX_ENTRY_SHARE = 0.5
SHORT_LINE_CHARS = 80
SHORT_LINE_SHARE = 0.7
MAX_ENTRY_WORDS = 9
# An index entry is a term or two; a contents line is a section title (R manuals: index pages
# 1.8-2.8 words a line, contents pages 4.2-8.6, leaders and page numbers removed).
INDEX_WORDS_PER_LINE = 3.5
CITATION_SHARE = 0.3
YEAR_SHARE = 0.4


@dataclass(frozen=True)
class LayoutCues:
    """Measured shares of a page's lines; what the role decision reads."""

    lines: int
    words: int
    leader_share: float
    ends_in_number_share: float
    index_entry_share: float
    short_line_share: float
    citation_share: float
    year_share: float
    sorted_share: float
    numbered_start_share: float
    words_per_line: float


def role_of_title(title: str) -> PageRole | None:
    """The role a heading or outline title names (`Concept Index` -> index), else None."""
    # Running headers carry a page number ("Appendix D: Function and variable index 103").
    cleaned = re.sub(r"\s+\d{1,4}$", "", SECTION_NUMBER.sub("", title.strip()))
    cleaned = re.sub(r"\s+", " ", cleaned).strip(" .:").lower()
    for role, pattern in _TITLES:
        if pattern.match(cleaned):
            return role
    return None


def measure(text: str) -> LayoutCues:
    """The layout cues of one page's text."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # Leaders collapsed: a contents line is short once its dots are gone.
    collapsed = [_LEADER.sub(" ", line).strip() for line in lines]
    count = len(lines) or 1

    def share(hits: int) -> float:
        return hits / count

    starts = [line[:1].lower() for line in lines if line[:1].isalpha()]
    ordered = sum(a <= b for a, b in itertools.pairwise(starts))
    return LayoutCues(
        lines=len(lines),
        words=len(text.split()),
        leader_share=share(sum(bool(_LEADER.search(line)) for line in lines)),
        ends_in_number_share=share(sum(_names_a_page(line) for line in collapsed)),
        index_entry_share=share(sum(bool(_INDEX_ENTRY.match(line)) for line in collapsed)),
        short_line_share=share(sum(len(line) <= SHORT_LINE_CHARS for line in collapsed)),
        citation_share=share(sum(bool(_CITATION_START.match(line)) for line in lines)),
        year_share=share(sum(bool(_YEAR.search(line)) for line in lines)),
        sorted_share=ordered / max(len(starts) - 1, 1),
        numbered_start_share=share(sum(line[:1].isdigit() for line in lines)),
        words_per_line=sum(len(line.split()) for line in collapsed) / count,
    )


def _names_a_page(line: str) -> bool:
    """A line of words that ends in a page number (`Installation 12`), not a row of figures."""
    if not _ENDS_IN_PAGE.search(line):
        return False
    words = line.split()
    # Index entries may list several pages ("mean, 23, 45"): count the words before them.
    numeric = sum(bool(re.fullmatch(r"[\d.,()\[\]–-]+", w)) for w in words)
    return numeric <= max(len(words) // 2, 1) or bool(_LEADER.search(line))


def _heading_role(text: str) -> PageRole | None:
    """The role named by one of the page's first three lines (its heading), if any."""
    for line in [ln for ln in text.splitlines() if ln.strip()][:3]:
        if _LEADER.search(line):  # "Concept index . . . 64" is a contents entry, not a heading
            continue
        role = role_of_title(line)
        if role is not None:
            return role
    return None


def _list_role(cues: LayoutCues, named: PageRole | None) -> PageRole | None:
    """contents / figures / index from the line shapes, with a named role lowering the bar."""
    tail = named is not None or cues.leader_share >= STRONG_LEADER_SHARE
    if cues.lines < (MIN_TAIL_LINES if tail else MIN_LIST_LINES):
        return None
    if cues.short_line_share < SHORT_LINE_SHARE:
        return None
    numbered = cues.ends_in_number_share >= (
        ENDS_IN_NUMBER_SHARE_WITH_TITLE if named else ENDS_IN_NUMBER_SHARE
    )
    if named == "index" and (numbered or cues.index_entry_share >= INDEX_ENTRY_SHARE / 2):
        return "index"
    if cues.leader_share >= LEADER_SHARE or (named in ("contents", "figures") and numbered):
        if named in ("contents", "figures"):
            return named
        # Short alphabetical terms with leaders, not numbered sections: an index continued.
        # Appendix titles ("Appendix A ...", "Appendix B ...") sort too, but are longer.
        alphabetical = cues.sorted_share >= 0.85 and cues.numbered_start_share < 0.3
        terms = cues.words_per_line <= INDEX_WORDS_PER_LINE
        return "index" if alphabetical and terms else "contents"
    if cues.index_entry_share >= INDEX_ENTRY_SHARE and cues.sorted_share >= 0.7:
        return "index"
    # No leaders and no title: only a list of short entries (titles, not sentences) counts.
    terse = cues.words_per_line <= MAX_ENTRY_WORDS
    if terse and cues.ends_in_number_share >= ENDS_IN_NUMBER_SHARE:
        return named if named in ("contents", "figures") else "contents"
    return None


def detect_page_role(
    text: str,
    *,
    page_number: int = 0,
    page_count: int = 1,
    outline_titles: Sequence[str] = (),
    section_titles: Sequence[str] = (),
) -> PageRole | None:
    """The page's role, or None for a content page.

    `outline_titles` are the titles of outline entries pointing at this page (PDF bookmarks);
    a role-naming one (`Concept Index`) counts like a heading on the page. `section_titles` are
    those of the entries whose page range covers it (an index's later pages, which no bookmark
    opens); they name a role the same way, and the layout cues must still agree. `page_number`
    is 1-based; the cover rule applies only to the first page of a document of 3 pages or more.
    """
    cues = measure(text)
    if cues.words <= 3 or (_BLANK_NOTE.search(text) and cues.words <= 12):
        return "blank"
    named = _heading_role(text)
    for title in (*outline_titles, *section_titles):
        named = named or role_of_title(title)
    if named == "bibliography":
        cited = cues.citation_share >= CITATION_SHARE or cues.year_share >= YEAR_SHARE
        return "bibliography" if cited and cues.lines >= 3 else None
    role = _list_role(cues, named)
    # A page an ordinary bookmark opens ("2.1 Vectors") starts a section: only dotted leaders
    # outvote that.
    opens_section = bool(outline_titles) and named is None
    if role is not None and (not opens_section or cues.leader_share >= LEADER_SHARE):
        return role
    title_page = page_number == 1 and page_count >= 3 and cues.lines <= 12 and cues.words <= 60
    # A title page: a few short lines, no sentences.
    if title_page and not re.search(r"[a-z]{3,}[.!?](\s|$)", text):
        return "cover"
    return None
