"""Heading matches: a query that is a line of a content page (a section heading) finds that page.

A user who types a section's title ("Families", "Installing R under macOS") means the page where
that section starts. Fusion cannot see that: the words of a short title are spread over the
whole section and its neighbours, so the next page, which holds more of the section's body,
often outranks the heading's page (measured on the R manuals of the contents-page case; see
README, Page roles). A line matches when it has the query's words, in order and nothing else
(case and punctuation aside), with or without a section number before it ("2.1", "Appendix C").
Stop words count: "What is R?" must not match a line that reads "R".
"""

from __future__ import annotations

import re
import unicodedata

from app.domain import Chunk
from app.text.sections import SECTION_NUMBER

_WORD = re.compile(r"\w+")
# A line far longer or shorter than the query cannot have the same words; skip reading it.
_MIN_LENGTH_RATIO = 0.5
_MAX_LENGTH_RATIO = 3.0


def words(text: str) -> list[str]:
    """The text's words, case-folded, without punctuation."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def has_heading(chunk: Chunk, query: str) -> bool:
    """True when a line of this content chunk reads as the query (section number aside)."""
    if chunk.page_role is not None:  # a contents or index line repeats the title: not a heading
        return False
    wanted = words(query)
    if not wanted:
        return False
    size = len(query.strip())
    for raw in chunk.text.splitlines():
        line = raw.strip()
        if not _MIN_LENGTH_RATIO * size <= len(line) <= _MAX_LENGTH_RATIO * size:
            continue
        # "R Graphics" is a title, "F References" an appendix letter: try the line both ways.
        bare = SECTION_NUMBER.sub("", line, count=1)
        if words(line) == wanted or (bare != line and words(bare) == wanted):
            return True
    return False
