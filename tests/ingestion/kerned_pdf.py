"""A PDF typeset the way DocBook/dblatex and some Arabic typesetters write one: each line is one
TJ array whose words are separate strings set apart by kerning offsets, in a CID font (Identity-H)
that has no space glyph at all. No space character is anywhere in the file."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from fpdf import FPDF
from pypdf import PdfReader, PdfWriter
from pypdf.generic import ArrayObject, DecodedStreamObject, NameObject, NumberObject

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
# A word written alone by fpdf2: "BT x y Td (glyph ids) Tj ET".
_WORD_RUN = re.compile(rb"BT [\d.]+ ([\d.]+) Td (\((?:\\.|[^\\)])*\)) Tj ET")
# The interword gap of justified text, in thousandths of an em (debian-reference uses -249..-278).
WORD_GAP = -277


def kerned_pdf(path: Path, lines: Sequence[str], *, rtl: bool = False) -> Path:
    """`lines` on one page, each a TJ array of its words with WORD_GAP between them; with `rtl`
    each line is in display order (last word first, each word's letters from its last), as a
    right-to-left line is drawn, in isolated letter forms."""
    pdf = FPDF()
    pdf.add_page()
    pdf.add_font("dejavu", fname=str(DEJAVU))
    pdf.set_font("dejavu", size=12)
    for row, line in enumerate(lines):
        words = line.split()
        # fpdf2 writes each word's glyphs in reading order; only their codes are kept.
        for word in reversed(words) if rtl else words:
            pdf.text(20, 30 + 10 * row, word)
    pdf.output(str(path))
    writer = PdfWriter(clone_from=PdfReader(path))
    page = writer.pages[0]
    rows: dict[bytes, list[bytes]] = {}
    for match in _WORD_RUN.finditer(page.get_contents().get_data()):  # type: ignore[union-attr]
        codes = _glyph_codes(match.group(2))
        rows.setdefault(match.group(1), []).append(_hex(codes[::-1] if rtl else codes))
    gap = b" %d " % WORD_GAP
    stream = b"".join(
        b"BT /F1 12 Tf 57 %s Td [%s] TJ ET\n" % (y, gap.join(words)) for y, words in rows.items()
    )
    contents = DecodedStreamObject()
    contents.set_data(stream)
    page[NameObject("/Contents")] = writer._add_object(contents)
    _drop_space_glyph(page["/Resources"]["/Font"]["/F1"].get_object())  # type: ignore[index]
    writer.write(path)
    return path


_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}


def _glyph_codes(literal: bytes) -> list[bytes]:
    """The two-byte glyph codes of a PDF literal string such as `(\\x00\\x01\\x00\\r)`."""
    raw = re.sub(
        rb"\\([0-7]{1,3}|.)",
        lambda m: (
            bytes([int(m.group(1), 8)])
            if m.group(1)[:1].isdigit()
            else _ESCAPES.get(m.group(1), m.group(1))
        ),
        literal[1:-1],
        flags=re.DOTALL,
    )
    return [raw[i : i + 2] for i in range(0, len(raw), 2)]


def _hex(codes: list[bytes]) -> bytes:
    return b"<" + b"".join(codes).hex().encode() + b">"


def _drop_space_glyph(font: object) -> None:
    """Make code 0x20 a wide glyph that is not a space, as in a subset font without a space
    (debian-reference's Times subset has a 564-wide glyph there): pypdf takes its width for
    the width of a space, so the kerned gaps look too narrow to be word breaks."""
    to_unicode = font["/ToUnicode"].get_object()  # type: ignore[index]
    cmap = to_unicode.get_data().replace(b"<0020> <0020>", b"<0020> <003D>")
    to_unicode.set_data(cmap)
    descendant = font["/DescendantFonts"][0].get_object()  # type: ignore[index]
    widths = list(descendant["/W"])
    assert widths[-3:-1] == [32, 32], widths  # fpdf2 puts the space last
    descendant[NameObject("/W")] = ArrayObject([*widths[:-1], NumberObject(838)])
