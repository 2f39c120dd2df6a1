"""Which script a text is written in: enough to tell an Arabic question from an English one."""

from __future__ import annotations

import re

_ARABIC_LETTER = re.compile("[\u0620-\u064a\u066e-\u06d3\u06fa-\u06ff\u0750-\u077f]")
_LATIN_LETTER = re.compile("[A-Za-z\u00c0-\u024f]")


def is_mostly_arabic(text: str) -> bool:
    """Whether most letters of the text are Arabic (an Arabic question naming `DNA` still is)."""
    return len(_ARABIC_LETTER.findall(text)) > len(_LATIN_LETTER.findall(text))


def has_letter(text: str) -> bool:
    """Whether the text holds an Arabic or a Latin letter."""
    return bool(_ARABIC_LETTER.search(text) or _LATIN_LETTER.search(text))


def has_latin_letter(text: str) -> bool:
    """Whether the text holds a Latin letter."""
    return bool(_LATIN_LETTER.search(text))
