"""DOCX, PPTX, XLSX and CSV loading, including zip bombs and damaged archives."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import docx
import pytest
from openpyxl import Workbook
from pptx import Presentation
from pptx.util import Inches

from app.errors import (
    CorruptDocument,
    DocumentTooLarge,
    EmptyDocument,
    EncryptedDocument,
    SuspiciousArchive,
)
from app.ingestion import LoadLimits, chunk_pages, load

pytestmark = pytest.mark.unit


def make_docx(path: Path, paragraphs: list[str]) -> Path:
    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    document.save(str(path))
    return path


def test_docx_text_including_tables(tmp_path: Path, limits: LoadLimits) -> None:
    document = docx.Document()
    document.add_paragraph("Refund policy: refunds are issued within 14 days.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Plan"
    table.cell(1, 0).text = "Enterprise"
    path = tmp_path / "policy.docx"
    document.save(str(path))
    pages = load(path, limits)
    assert [(p.number, p.label) for p in pages] == [(1, "1")]
    assert "refunds are issued within 14 days" in pages[0].text
    assert "Enterprise" in pages[0].text


def test_docx_that_is_not_a_zip_is_corrupt(tmp_path: Path, limits: LoadLimits) -> None:
    path = tmp_path / "fake.docx"
    path.write_bytes(b"This was renamed from .txt to .docx by someone.")
    with pytest.raises(CorruptDocument, match="not a valid DOCX"):
        load(path, limits)


def test_zip_without_document_part_is_corrupt(tmp_path: Path, limits: LoadLimits) -> None:
    path = tmp_path / "other.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("hello.txt", "just a zip")
    with pytest.raises(CorruptDocument, match="not a DOCX document"):
        load(path, limits)


def test_password_protected_office_file_is_encrypted(tmp_path: Path, limits: LoadLimits) -> None:
    path = tmp_path / "locked.docx"
    # Encrypted OOXML is an OLE compound file: this is its fixed signature.
    path.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504)
    with pytest.raises(EncryptedDocument, match="password"):
        load(path, limits)


def test_docx_zip_bomb_by_compression_ratio(tmp_path: Path, limits: LoadLimits) -> None:
    path = make_docx(tmp_path / "bomb.docx", ["innocent looking"])
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/media/padding.xml", b"\x00" * (20 * 1024 * 1024))
    with pytest.raises(SuspiciousArchive, match="compression ratio"):
        load(path, limits)


def _lie_about_size(path: Path, member: str, declared: int) -> None:
    """Patch a member's uncompressed size in its local and central headers (a crafted bomb)."""
    data = bytearray(path.read_bytes())
    name = member.encode()
    central = data.find(b"PK\x01\x02" + bytes(24)[:0])
    while central != -1:
        name_len = struct.unpack_from("<H", data, central + 28)[0]
        if data[central + 46 : central + 46 + name_len] == name:
            struct.pack_into("<I", data, central + 24, declared)
            local = struct.unpack_from("<I", data, central + 42)[0]
            struct.pack_into("<I", data, local + 22, declared)
        central = data.find(b"PK\x01\x02", central + 4)
    path.write_bytes(bytes(data))


def test_docx_zip_bomb_by_declared_size_is_refused_before_decompressing(
    tmp_path: Path,
) -> None:
    path = make_docx(tmp_path / "bomb.docx", ["innocent looking"])
    _lie_about_size(path, "word/document.xml", 4_000_000_000)
    declared = {m.filename: m.file_size for m in zipfile.ZipFile(path).infolist()}
    assert declared["word/document.xml"] == 4_000_000_000
    # Decompressing would fail differently (size/CRC mismatch): SuspiciousArchive proves the
    # check ran on the central directory first.
    with pytest.raises(SuspiciousArchive, match="zip bomb"):
        load(path, LoadLimits())


def test_archive_byte_cap_comes_from_limits(tmp_path: Path) -> None:
    path = make_docx(tmp_path / "big.docx", ["word " * 1000])
    load(path, LoadLimits())
    with pytest.raises(SuspiciousArchive, match="expand to"):
        load(path, LoadLimits(max_archive_bytes=10_000))


def test_docx_character_cap(tmp_path: Path) -> None:
    path = make_docx(tmp_path / "long.docx", ["lorem ipsum " * 50] * 10)
    with pytest.raises(DocumentTooLarge, match="characters"):
        load(path, LoadLimits(max_chars=1000))


def make_pptx(path: Path, slides: list[list[str]]) -> Path:
    presentation = Presentation()
    for texts in slides:
        slide = presentation.slides.add_slide(presentation.slide_layouts[6])  # blank layout
        for i, text in enumerate(texts):
            box = slide.shapes.add_textbox(Inches(1), Inches(1 + i), Inches(6), Inches(1))
            box.text_frame.text = text
    presentation.save(str(path))
    return path


def test_pptx_slide_number_is_the_page(tmp_path: Path, limits: LoadLimits) -> None:
    path = make_pptx(tmp_path / "deck.pptx", [["Welcome"], [], ["Quarterly revenue grew 12%"]])
    pages = load(path, limits)
    assert [(p.number, p.label, p.text) for p in pages] == [
        (1, "1", "Welcome"),
        (3, "3", "Quarterly revenue grew 12%"),
    ]


def test_pptx_slide_cap(tmp_path: Path) -> None:
    path = make_pptx(tmp_path / "deck.pptx", [["a"], ["b"], ["c"]])
    with pytest.raises(DocumentTooLarge, match="3 slides"):
        load(path, LoadLimits(max_pages=2))


def test_pptx_without_text_is_empty(tmp_path: Path, limits: LoadLimits) -> None:
    path = make_pptx(tmp_path / "pictures.pptx", [[], []])
    with pytest.raises(EmptyDocument, match="no text"):
        load(path, limits)


def test_xlsx_chunks_repeat_the_header_and_name_sheet_and_rows(
    tmp_path: Path, limits: LoadLimits
) -> None:
    workbook = Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.title = "Prices"
    sheet.append(["Product", "Price", "Region"])
    for n in range(1, 101):
        sheet.append([f"Widget {n}", n * 1.5, "EMEA"])
    workbook.create_sheet("Empty")
    path = tmp_path / "prices.xlsx"
    workbook.save(str(path))
    pages = load(path, limits)
    assert [(p.number, p.label, p.kind, p.first_row) for p in pages] == [(1, "Prices", "table", 2)]
    assert pages[0].header == "Product | Price | Region"
    chunks = chunk_pages(
        pages, tenant_id="t", document_id="d", source="prices.xlsx", chunk_size=400, chunk_overlap=0
    )
    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk.text.startswith("Product | Price | Region\n")
        assert len(chunk.text) <= 400
    assert chunks[0].page_label.startswith("Prices rows 2-")
    assert chunks[-1].page_label.endswith("-101")
    # Row labels are true: the first data line of each chunk is that row of the sheet.
    for chunk in chunks:
        first_row = int(chunk.page_label.split()[-1].split("-")[0])
        assert chunk.text.splitlines()[1].startswith(f"Widget {first_row - 1} |")
    assert "Widget 1 | 1.5 | EMEA" in chunks[0].text


def test_xlsx_table_away_from_a1_with_blank_rows_keeps_true_row_numbers(
    tmp_path: Path, limits: LoadLimits
) -> None:
    workbook = Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet["B3"], sheet["C3"] = "Name", "Age"
    sheet["B4"], sheet["C4"] = "Ali", 31
    sheet["B7"], sheet["C7"] = "Sara", 29
    path = tmp_path / "gaps.xlsx"
    workbook.save(str(path))
    page = load(path, limits)[0]
    assert (page.header, page.first_row) == ("Name | Age", 4)
    chunks = chunk_pages(
        [page], tenant_id="t", document_id="d", source="g", chunk_size=22, chunk_overlap=0
    )
    assert [(c.page_label, c.text) for c in chunks] == [
        ("Sheet row 4", "Name | Age\nAli | 31"),
        ("Sheet row 7", "Name | Age\nSara | 29"),
    ]


def test_csv_with_semicolons_and_row_ranges(tmp_path: Path, limits: LoadLimits) -> None:
    path = tmp_path / "people.csv"
    rows = ["name;city"] + [f"person {n};city {n}" for n in range(1, 41)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    pages = load(path, limits)
    assert pages[0].header == "name | city"
    chunks = chunk_pages(
        pages, tenant_id="t", document_id="d", source="people.csv", chunk_size=200, chunk_overlap=0
    )
    assert chunks[0].page_label.startswith("rows 2-")
    assert all(c.text.startswith("name | city\n") for c in chunks)
    covered = "".join(c.text.split("\n", 1)[1] + "\n" for c in chunks)
    assert covered.count("person ") == 40


def test_header_longer_than_a_chunk_still_yields_whole_row_chunks(
    tmp_path: Path, limits: LoadLimits
) -> None:
    path = tmp_path / "wide.csv"
    header = ",".join(f"column_{n}" for n in range(30))
    path.write_text(header + "\n" + "\n".join(f"{n},{n},{n}" for n in (1, 2, 3)))
    chunks = chunk_pages(
        load(path, limits),
        tenant_id="t",
        document_id="d",
        source="w",
        chunk_size=100,
        chunk_overlap=0,
    )
    assert [c.page_label for c in chunks] == ["rows 2-3", "row 4"]
    assert [c.text.splitlines()[1:] for c in chunks] == [["1 | 1 | 1", "2 | 2 | 2"], ["3 | 3 | 3"]]
    assert all(c.text.startswith("column_0 | column_1 |") for c in chunks)


@pytest.mark.parametrize(
    "extension", [".pdf", ".docx", ".txt", ".md", ".pptx", ".xlsx", ".csv", ".py", ".json"]
)
def test_empty_file_of_each_type(tmp_path: Path, limits: LoadLimits, extension: str) -> None:
    path = tmp_path / f"empty{extension}"
    path.write_bytes(b"")
    with pytest.raises(EmptyDocument, match="empty"):
        load(path, limits)
