"""Word spaces in PDFs that never write a space character: words placed by kerning offsets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kerned_pdf import DEJAVU, kerned_pdf
from pypdf import PdfReader

from app.ingestion import LoadLimits, load, load_with_timeout
from eval.glued_words import glued_share
from eval.manual_questions import DEV_WIDE_SOURCES, install_hint
from tests.availability import needs

ENGLISH = [
    "Just like any other modern operating system the kernel",
    "keeps track of every process and every open file",
    "so shut the system down properly before you switch it off",
]
ARABIC = [
    "الخط الأميري خط نسخي موجه لطباعة الكتب",
    "للخط الطباعي الجميل الذي تميزت به مطبعة بولاق",
]
ARABIC_WORD = re.compile("[\u0621-\u064a]+")
needs_font = needs(DEJAVU.exists(), "DejaVuSans.ttf not installed (fonts-dejavu-core)")


@pytest.mark.unit
@needs_font
def test_words_set_apart_by_kerning_offsets_are_loaded_as_separate_words(
    tmp_path: Path, limits: LoadLimits
) -> None:
    path = kerned_pdf(tmp_path / "kerned.pdf", ENGLISH)
    # What pypdf reads from it, as the loader did before: the words run together.
    assert "Justlikeanyothermodern" in PdfReader(path).pages[0].extract_text()
    # The service parses uploads in its limited child process: the spaces must survive it.
    (page,) = load_with_timeout(path, limits, timeout_s=60)
    assert page.text.split() == " ".join(ENGLISH).split(), page.text
    assert page.text.splitlines() == ENGLISH


@pytest.mark.unit
@needs_font
def test_arabic_words_set_apart_by_kerning_offsets_keep_their_spaces_and_order(
    tmp_path: Path, limits: LoadLimits
) -> None:
    path = kerned_pdf(tmp_path / "kerned-ar.pdf", ARABIC, rtl=True)
    # pypdf puts the letters in reading order but runs the words together.
    assert "الخطالأميريخطنسخي" in PdfReader(path).pages[0].extract_text()
    (page,) = load(path, limits)
    print(f"\nloaded: {page.text}")
    assert [ARABIC_WORD.findall(line) for line in page.text.splitlines()] == [
        ARABIC_WORD.findall(line) for line in ARABIC
    ]


DEBIAN_REFERENCE = DEV_WIDE_SOURCES["debian-reference"]


@pytest.mark.integration
@needs(
    DEBIAN_REFERENCE.path.is_file(),
    f"{DEBIAN_REFERENCE.path} not found ({install_hint([DEBIAN_REFERENCE])})",
)
def test_debian_reference_pages_are_loaded_with_their_word_spaces(limits: LoadLimits) -> None:
    pages = load(DEBIAN_REFERENCE.path, limits)
    text = "\n".join(page.text for page in pages)
    # Letters in runs of more than 20 letters: 43.6% with pypdf alone, 0.01% with pdftotext.
    assert glued_share(text) < 0.005
    shutdown = next(page for page in pages if page.number == 32)
    assert "Just like any other modern OS where the file operation involves caching" in " ".join(
        shutdown.text.split()
    )
