"""Running headers and footers: the chapter title and page number printed on every page.

They repeat a heading's words on every page of its chapter, so a question that names the chapter
matches all of them equally and the page that opens it no longer stands out (measured on the R
manuals: eval/contents_case.py). A first or last line that, without its digits, recurs on at
least MIN_PAGES pages is dropped from the page's text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

MIN_PAGES = 3
MIN_DOCUMENT_PAGES = 4
MIN_PAGE_LINES = 3


def _key(line: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"\d+", "", line)).strip().lower()


def _edges(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if line.strip()]
    # A page of one or two lines has no header to speak of; its lines are its content.
    return list(dict.fromkeys([lines[0], lines[-1]])) if len(lines) >= MIN_PAGE_LINES else []


def strip_running_lines(texts: Sequence[str]) -> list[str]:
    """The page texts without lines repeated as a header or footer on several pages."""
    if len(texts) < MIN_DOCUMENT_PAGES:
        return list(texts)
    counts = Counter(key for text in texts for key in {_key(line) for line in _edges(text)})
    running = {key for key, n in counts.items() if n >= MIN_PAGES}
    # A bare page number (key "") is running too: it tells a reader nothing the label does not.
    out = []
    for text in texts:
        drop = {line for line in _edges(text) if _key(line) in running}
        lines = text.splitlines()
        while lines and (not lines[0].strip() or lines[0] in drop):
            lines.pop(0)
        while lines and (not lines[-1].strip() or lines[-1] in drop):
            lines.pop()
        out.append("\n".join(lines))
    return out
