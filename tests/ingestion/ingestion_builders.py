"""Builders that generate real documents at test time (fpdf2, pypdf), shared by the tests."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path

from fpdf import FPDF
from pypdf import PdfReader, PdfWriter
from pypdf.constants import PageLabelStyle

ARABIC_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")

WORDS = [
    "retrieval",
    "ranking",
    "index",
    "vector",
    "tenant",
    "answer",
    "citation",
    "passage",
    "context",
    "model",
    "query",
    "document",
    "page",
    "label",
    "overlap",
    "chunk",
    "window",
    "token",
    "embedding",
    "search",
    "filter",
    "score",
    "cache",
    "upload",
    "worker",
    "stream",
    "parser",
    "header",
    "footer",
    "section",
    "appendix",
    "figure",
    "table",
    "result",
]


def pdf_from_pages(path: Path, pages: Sequence[Sequence[str]], font_size: float = 8) -> Path:
    """A PDF with one page per entry, each line written as its own line of text."""
    pdf = FPDF()
    pdf.set_auto_page_break(False)
    for lines in pages:
        pdf.add_page()
        pdf.set_font("Helvetica", size=font_size)
        for line in lines:
            pdf.cell(0, 4, line, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def ninety_five_char_lines(count: int, seed: int) -> list[str]:
    """Prose-like lines of 90-100 characters, as in a typical single-column PDF."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        target = rng.randint(90, 100)
        words: list[str] = []
        while len(" ".join(words)) < target - 8:
            words.append(rng.choice(WORDS))
        line = " ".join(words)
        lines.append(line[0].upper() + line[1:] + ".")
    return lines


def relabel(path: Path, labels: Callable[[PdfWriter], None]) -> Path:
    """Rewrite a PDF with page labels set by `labels(writer)`."""
    writer = PdfWriter(clone_from=PdfReader(path))
    labels(writer)
    writer.write(path)
    return path


def roman_front_matter_pdf(path: Path) -> Path:
    """Pages i, ii, iii (front matter) then 1, 2, 3, 4 (body), as printed in a book."""
    pages = [[f"Front matter page {n}: preface and contents."] for n in ("one", "two", "three")]
    pages += [[f"Chapter {n} body text starts here."] for n in ("one", "two", "three", "four")]
    pdf_from_pages(path, pages)

    def labels(writer: PdfWriter) -> None:
        writer.set_page_label(0, 2, style=PageLabelStyle.LOWERCASE_ROMAN, start=1)
        writer.set_page_label(3, 6, style=PageLabelStyle.DECIMAL, start=1)

    return relabel(path, labels)


def arabic_pdf(path: Path, text: str, *, shaped: bool) -> Path:
    """An Arabic PDF written by fpdf2, with or without HarfBuzz text shaping."""
    pdf = FPDF()
    pdf.add_page()
    pdf.add_font("dejavu", fname=str(ARABIC_FONT))
    pdf.set_font("dejavu", size=13)
    if shaped:
        pdf.set_text_shaping(True)
    pdf.multi_cell(0, 8, text)
    pdf.output(str(path))
    return path
