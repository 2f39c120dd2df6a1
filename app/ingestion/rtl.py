"""Detect and repair Arabic text that a PDF stored in visual (reversed) order.

Some PDF producers write right-to-left text as one string in display order, so pypdf returns
`ملاعلاب` for `بالعالم`. Indexing that silently ruins retrieval. Arabic spelling gives reliable
evidence of direction: the article `ال` starts words, `ة` and `ى` only end them. In reversed text
these show up mirrored (`لا` ending words, `ة`/`ى` starting them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ARABIC_WORD = re.compile("[\u0621-\u064a\u0671-\u06d3]{3,}")
_ARABIC_LETTER = re.compile("[\u0621-\u064a\u0671-\u06d3]")
# A left-to-right run inside an RTL line: Latin words and numbers, with the spaces and
# punctuation that join them ("SR-33", "3.14", "New York"). These keep their order when flipped.
_LTR_RUN = re.compile(
    r"[A-Za-z0-9\u00c0-\u024f\u0660-\u0669]+(?:[ .,:/\-_]+[A-Za-z0-9\u00c0-\u024f\u0660-\u0669]+)*"
)
_ARTICLE_PREFIXES = ("ال", "وال", "بال", "فال", "كال", "لل")
_FINAL_ONLY = ("ة", "ى")


@dataclass(frozen=True)
class DirectionEvidence:
    """Counts of spelling patterns that only occur in logical or in reversed Arabic."""

    logical: int
    reversed: int

    @property
    def looks_reversed(self) -> bool:
        """True when the reversed patterns clearly dominate (at least 2 and twice the others)."""
        return self.reversed >= 2 and self.reversed > 2 * self.logical


def direction_evidence(text: str) -> DirectionEvidence:
    """Count logical-order and reversed-order Arabic spelling patterns in `text`."""
    logical = reversed_ = 0
    for word in _ARABIC_WORD.findall(text):
        if word.startswith(_ARTICLE_PREFIXES) or word.endswith(_FINAL_ONLY):
            logical += 1
        flipped = word[::-1]
        if flipped.startswith(_ARTICLE_PREFIXES) or word.startswith(_FINAL_ONLY):
            reversed_ += 1
    return DirectionEvidence(logical=logical, reversed=reversed_)


def _reverse_line(line: str) -> str:
    if not _ARABIC_LETTER.search(line):
        return line
    flipped = line[::-1]
    # Latin words and numbers were already left-to-right inside the visual string.
    return _LTR_RUN.sub(lambda m: m.group()[::-1], flipped)


def restore_logical_order(text: str) -> str:
    """Turn visually ordered RTL lines back into reading order; lines without Arabic are kept."""
    return "\n".join(_reverse_line(line) for line in text.split("\n"))


def fix_reversed_arabic(text: str) -> tuple[str, bool]:
    """Return `text` in logical order and whether it had to be reversed."""
    if not _ARABIC_LETTER.search(text) or not direction_evidence(text).looks_reversed:
        return text, False
    return restore_logical_order(text), True
