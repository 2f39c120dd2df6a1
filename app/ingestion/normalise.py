"""Text clean-up applied to every extracted page: NFC, line endings, control characters."""

from __future__ import annotations

import re
import unicodedata

# Presentation forms (Latin ligatures like "ﬁ", Arabic contextual glyphs like "ﻣ") come out of
# some PDFs instead of plain letters; they never match a typed query, so fold them with NFKC.
# Only these blocks are folded: NFKC elsewhere would also rewrite "²", "½" or full-width text.
_PRESENTATION_FORMS = re.compile("[\ufb00-\ufdff\ufe70-\ufefe]+")
# C0/C1 controls except tab and newline, plus BOM/ZWNBSP and soft hyphen, which only add noise.
_NOISE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufeff\u00ad]")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")
_BLANK_LINES = re.compile(r"\n{3,}")
# chunks.page_label is VARCHAR(64): a label from a file (PDF page label, sheet title) must fit.
MAX_LABEL_CHARS = 64


def normalise_text(text: str) -> str:
    """NFC-normalise and tidy extracted text (line endings, noise characters, blank runs)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _PRESENTATION_FORMS.sub(lambda m: unicodedata.normalize("NFKC", m.group()), text)
    text = _NOISE.sub("", text)
    text = unicodedata.normalize("NFC", text)
    text = _TRAILING_SPACE.sub("\n", text)
    text = _BLANK_LINES.sub("\n\n", text)
    return text.strip("\n").rstrip()


def normalise_line(text: str) -> str:
    """Normalise a single-line value (a table cell or header): NFC and no line breaks."""
    return " ".join(normalise_text(text).split())


def normalise_label(raw: str, max_chars: int = MAX_LABEL_CHARS) -> str:
    """A page label or sheet title from a file as one short line: NFC, no control or format
    characters, whitespace collapsed, at most `max_chars` characters."""
    text = unicodedata.normalize("NFC", raw)
    # Whitespace of any kind separates words; other control/format/private-use characters
    # (category C*: bidi overrides, zero-width marks, NUL) are dropped.
    text = "".join(
        ch for ch in text if ch.isspace() or not unicodedata.category(ch).startswith("C")
    )
    return " ".join(text.split())[:max_chars].rstrip()
