"""Find a chunk's passage in a page's text as another extractor saw it.

Ingestion extracts text with pypdf; the page picture comes from PDFium, whose text differs in
whitespace, line breaks, hyphens and ligatures. Both sides are reduced to a comparison key (NFKC,
case-folded, letters and digits only) that keeps a map back to PDFium's character indexes.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

# Head and tail anchors used when the whole passage is not found verbatim (a few characters
# extracted differently in the middle must not lose the highlight).
_ANCHOR_CHARS = 24


@dataclass(frozen=True)
class KeyedText:
    """The comparison key of a text, and for each key character the index it came from."""

    key: str
    origin: tuple[int, ...]


def keyed(chars: Sequence[str]) -> KeyedText:
    """The comparison key of a sequence of characters (one per source index)."""
    key: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(chars):
        for folded in unicodedata.normalize("NFKC", char).casefold():
            if folded.isalnum():
                key.append(folded)
                origin.append(index)
    return KeyedText("".join(key), tuple(origin))


def _occurrences(haystack: str, needle: str) -> list[int]:
    found, at = [], haystack.find(needle)
    while at >= 0:
        found.append(at)
        at = haystack.find(needle, at + 1)
    return found


def _nearest(positions: list[int], target: float) -> int:
    return min(positions, key=lambda position: abs(position - target))


def locate(page: KeyedText, passage: str, position_hint: float = 0.0) -> tuple[int, int] | None:
    """Source indexes [first, last] of `passage` in `page`, or None when it is not there.

    `position_hint` (0..1, the passage's start offset relative to its page text) picks among
    repeated occurrences, so a sentence printed twice is highlighted where the chunk was cut.
    """
    needle = keyed(passage).key
    if not needle or not page.key:
        return None
    target = position_hint * len(page.key)
    starts = _occurrences(page.key, needle)
    if starts:
        begin = _nearest(starts, target)
        return page.origin[begin], page.origin[begin + len(needle) - 1]
    if len(needle) < 2 * _ANCHOR_CHARS:
        return None
    heads = _occurrences(page.key, needle[:_ANCHOR_CHARS])
    if not heads:
        return None
    begin = _nearest(heads, target)
    tails = [t for t in _occurrences(page.key, needle[-_ANCHOR_CHARS:]) if t > begin]
    # The passage's end: its tail anchor when found not too far away, else its expected length.
    limit = begin + 2 * len(needle)
    end = min(tails) + _ANCHOR_CHARS - 1 if tails and min(tails) < limit else None
    if end is None:
        end = min(begin + len(needle), len(page.key)) - 1
    return page.origin[begin], page.origin[end]
