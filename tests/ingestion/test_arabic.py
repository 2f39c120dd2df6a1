"""Arabic: PDF reading order (logical vs. visual), TXT encodings, DOCX round trip."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import docx
import pytest
from ingestion_builders import ARABIC_FONT, arabic_pdf
from pypdf import PdfReader

from app.errors import UndecodableText
from app.ingestion import LoadLimits, load
from app.ingestion.rtl import direction_evidence, fix_reversed_arabic
from tests.availability import needs, require

pytestmark = pytest.mark.unit

ARABIC = (
    "تقدم هذه الوثيقة وصفا للخدمة الجديدة. يقوم النظام بالبحث في المستندات "
    "ويعرض الإجابة مع الاقتباس من الصفحة الصحيحة. المكتبة العامة مفتوحة للزوار كل يوم."
)
ARABIC_WORDS = re.compile("[\u0621-\u064a]+")


def words(text: str) -> list[str]:
    return ARABIC_WORDS.findall(text)


needs_font = needs(ARABIC_FONT.exists(), "DejaVuSans.ttf not installed (fonts-dejavu-core)")


@needs_font
def test_visual_order_pdf_is_detected_and_restored(tmp_path: Path, limits: LoadLimits) -> None:
    path = arabic_pdf(tmp_path / "visual.pdf", ARABIC, shaped=False)
    raw = PdfReader(path).pages[0].extract_text()
    print(f"\noriginal : {ARABIC}\nextracted: {raw}")
    # Without shaping fpdf2 writes each line in display order: pypdf returns it reversed.
    assert "الوثيقة" not in raw and "ةقيثولا" in raw
    assert direction_evidence(raw).looks_reversed
    text = load(path, limits)[0].text
    print(f"loaded   : {text}")
    assert sorted(words(text)) == sorted(words(ARABIC))
    assert "يقوم النظام بالبحث في المستندات" in " ".join(text.split())


@needs_font
def test_shaped_pdf_comes_out_in_logical_order_and_is_kept(
    tmp_path: Path, limits: LoadLimits
) -> None:
    require(importlib.util.find_spec("uharfbuzz") is not None, "uharfbuzz is not installed")
    path = arabic_pdf(tmp_path / "shaped.pdf", ARABIC, shaped=True)
    raw = PdfReader(path).pages[0].extract_text()
    print(f"\noriginal : {ARABIC}\nextracted: {raw}")
    # One glyph per text operator: pypdf's own RTL handling restores reading order.
    assert not direction_evidence(raw).looks_reversed
    text = load(path, limits)[0].text
    assert words(" ".join(text.split())) == words(ARABIC)


def test_logical_arabic_and_latin_text_are_never_flipped() -> None:
    assert fix_reversed_arabic(ARABIC) == (ARABIC, False)
    english = "The library opens at nine. Results are cited by page."
    assert fix_reversed_arabic(english) == (english, False)
    # Common words ending in "لا" (إلا، مثلا، ولا) must not tip logical text over.
    tricky = "لا أعرف إلا هذا، مثلا ولا غيره في المدينة القديمة."
    assert fix_reversed_arabic(tricky)[1] is False


def test_reversed_line_with_numbers_and_latin_keeps_their_order() -> None:
    logical = "رقم الطلب SR-33 في الصفحة 12 من الدليل"
    visual = logical[::-1]
    # In display order, Latin and digits stay left-to-right inside the reversed line.
    for run in ("SR-33", "12"):
        visual = visual.replace(run[::-1], run)
    fixed, was_reversed = fix_reversed_arabic(visual)
    assert was_reversed
    assert fixed == logical


@pytest.mark.parametrize(
    ("encoding", "bom"),
    [("windows-1256", b""), ("utf-16", b""), ("utf-8", b""), ("utf-8", b"\xef\xbb\xbf")],
    ids=["cp1256", "utf-16-bom", "utf-8", "utf-8-bom"],
)
def test_arabic_txt_round_trip(
    tmp_path: Path, limits: LoadLimits, encoding: str, bom: bytes
) -> None:
    path = tmp_path / "arabic.txt"
    path.write_bytes(bom + ARABIC.encode(encoding))
    pages = load(path, limits)
    assert [(p.number, p.label, p.text) for p in pages] == [(1, "1", ARABIC)]


def test_utf16_without_bom_is_decoded(tmp_path: Path, limits: LoadLimits) -> None:
    path = tmp_path / "plain16.txt"
    path.write_bytes("Hello from a UTF-16 file without a byte order mark.".encode("utf-16-le"))
    assert load(path, limits)[0].text.startswith("Hello from a UTF-16 file")


def test_cp1256_bytes_are_not_turned_into_latin_mojibake(
    tmp_path: Path, limits: LoadLimits
) -> None:
    path = tmp_path / "arabic.txt"
    path.write_bytes(ARABIC.encode("windows-1256"))
    text = load(path, limits)[0].text
    assert not re.search("[\u00c0-\u00ff]", text), text


def test_invalid_utf16_after_bom_is_rejected(tmp_path: Path, limits: LoadLimits) -> None:
    path = tmp_path / "broken.txt"
    path.write_bytes(b"\xff\xfe" + "نص".encode("utf-16-le") + b"\x00\xd8")  # lone surrogate
    with pytest.raises(UndecodableText, match="UTF-8"):
        load(path, limits)


def test_arabic_docx_round_trip(tmp_path: Path, limits: LoadLimits) -> None:
    document = docx.Document()
    document.add_heading("دليل الخدمة", level=1)
    for sentence in ARABIC.split(". "):
        document.add_paragraph(sentence)
    path = tmp_path / "arabic.docx"
    document.save(str(path))
    text = load(path, limits)[0].text
    assert "دليل الخدمة" in text
    assert words(text) == words("دليل الخدمة " + ARABIC)
