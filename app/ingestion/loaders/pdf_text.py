"""A PDF page's text with its word spaces, read by PDFium from the glyph positions.

Many PDF producers (DocBook/dblatex, some LaTeX and Arabic typesetters) never write a space
character: each word is its own text run, placed by position or by a kerning offset. pypdf's
`extract_text` then returns "Justlikeanyothermodern..." and "الخطالأميريخطنسخي", and neither
the keyword index nor the embedder can use a glued word. PDFium's text page inserts a space
where the gap between glyphs says there is one, keeps right-to-left lines in reading order, and
is an order of magnitude faster (measured on 15 Debian manuals: bench/pdf_text_spaces.py).

pypdf stays the fallback: for the whole file when PDFium cannot open it or counts other pages,
and for a page where PDFium finds no usable text layer but pypdf might.
"""

from __future__ import annotations

import ctypes
import logging
import re
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import NamedTuple

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from pypdf import PageObject

from app.ingestion.ocr_pdf import lacks_text_layer
from app.ingestion.pdf_outline import LINE_TOLERANCE, TextTops

log = logging.getLogger(__name__)

# PDFium writes U+FFFE for a hyphen it found at the end of a line and joins the two lines
# ("dis\ufffeadvantage"). The hyphen and the line break are put back, as printed: evidence,
# running headers and chunking see the same lines as before, and "Unix-alikes" keeps its hyphen.
_LINE_END_HYPHEN = "\ufffe"
_ARABIC_LETTER = re.compile("[\u0621-\u064a]")
_ALEFS = frozenset("اأإآ")
_LAM = "ل"


def _lam_alef_restored(text_page: pdfium.PdfTextPage, text: str) -> str:
    """`text` with each lam-alef ligature's letters in reading order again.

    A shaping typesetter draws lam + alef as one glyph whose Unicode is the two letters;
    PDFium reorders the right-to-left line glyph by glyph and then reverses the pair too
    ("اإلجابة" for "الإجابة"). The two letters of one glyph share its origin, which tells them
    apart from an alef and a lam drawn as two glyphs (the article "ال").
    """
    count = text_page.count_chars()
    chars = [chr(pdfium_c.FPDFText_GetUnicode(text_page.raw, i)) for i in range(count)]
    if "".join(chars) != text:  # PDFium inserted or left out characters: no safe index
        return text
    x, y = ctypes.c_double(), ctypes.c_double()
    origin: list[tuple[float, float]] = []
    for index in range(len(chars)):
        pdfium_c.FPDFText_GetCharOrigin(text_page.raw, index, ctypes.byref(x), ctypes.byref(y))
        origin.append((x.value, y.value))
    for index in range(1, len(chars)):
        if (
            chars[index] == _LAM
            and chars[index - 1] in _ALEFS
            and origin[index] == origin[index - 1]
        ):
            chars[index - 1], chars[index] = chars[index], chars[index - 1]
    return "".join(chars)


class PdfiumPage(NamedTuple):
    """A page as PDFium read it: its text, and where its lines are printed when asked for."""

    text: str | None
    tops: TextTops | None = None


def _line_heights(text_page: pdfium.PdfTextPage) -> TextTops:
    """The page's characters in reading order, in runs printed at one height (each glyph's
    origin, the baseline pypdf's text visitor reports): where a bookmark's height points."""
    tops = TextTops()
    x, y = ctypes.c_double(), ctypes.c_double()
    run: list[str] = []
    height: float | None = None
    for index in range(text_page.count_chars()):
        char = chr(pdfium_c.FPDFText_GetUnicode(text_page.raw, index))
        placed = not char.isspace() and pdfium_c.FPDFText_GetCharOrigin(
            text_page.raw, index, ctypes.byref(x), ctypes.byref(y)
        )
        if placed and height is not None and abs(y.value - height) > LINE_TOLERANCE:
            tops.add("".join(run), height)
            run = []
        if placed and not run:
            height = y.value
        if char in "\r\n":
            char = " "  # a line break between runs of one height still parts their words
        if height is not None:
            run.append(char)
    if height is not None:
        tops.add("".join(run), height)
    return tops


def _read_page(document: pdfium.PdfDocument, index: int, with_tops: bool) -> PdfiumPage:
    page = document[index]
    try:
        text_page = page.get_textpage()
        try:
            text: str = text_page.get_text_range()
            if _ARABIC_LETTER.search(text):
                text = _lam_alef_restored(text_page, text)
            tops = _line_heights(text_page) if with_tops else None
        finally:
            text_page.close()
    finally:
        page.close()
    return PdfiumPage(text.replace(_LINE_END_HYPHEN, "-\n"), tops)


def positioned_texts(
    path: Path, count: int, with_tops: Collection[int] = ()
) -> Iterator[PdfiumPage]:
    """Each page as PDFium reads it, page by page (so the caller's character budget stops the
    work early), with its line heights for the page indexes in `with_tops`; a page without text
    for every page when PDFium cannot read the file as `count` pages, and for a page it cannot
    read (the caller then uses pypdf there)."""
    try:
        document = pdfium.PdfDocument(path)
    except pdfium.PdfiumError as exc:
        log.warning("PDFium cannot open the PDF (%s); text without positioned spaces", exc)
        yield from [PdfiumPage(None)] * count
        return
    try:
        if len(document) != count:
            log.warning(
                "PDFium counts %d pages where pypdf counts %d; text without positioned spaces",
                len(document),
                count,
            )
            yield from [PdfiumPage(None)] * count
            return
        for index in range(count):
            try:
                yield _read_page(document, index, index in with_tops)
            except pdfium.PdfiumError as exc:
                log.warning("PDFium cannot read page %d (%s)", index + 1, exc)
                yield PdfiumPage(None)
    finally:
        document.close()


def _usable_chars(text: str) -> int:
    return sum(char.isalnum() for char in text)


def best_page_text(positioned: str | None, page: PageObject) -> str:
    """PDFium's text of a page, unless it has no usable text layer and pypdf's text of the
    page's content stream (extracted only then) holds more letters and digits."""
    if positioned and not lacks_text_layer(positioned):
        return positioned
    fallback = page.extract_text() or ""
    if positioned is None or _usable_chars(fallback) > _usable_chars(positioned):
        return fallback
    return positioned
