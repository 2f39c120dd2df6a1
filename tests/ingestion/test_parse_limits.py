"""OS limits on the parse child (memory, CPU), labels that fit their column, defused XML.

Real files through the real child process: a limit that is hit must end as DocumentTooComplex
(`document_too_complex`), never as a crash or a generic "damaged file".
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from ingestion_builders import pdf_from_pages, relabel
from openpyxl import Workbook
from pypdf import PdfWriter
from pypdf.constants import PageLabelStyle

from app.errors import CorruptDocument, DocumentTooComplex, IngestionError
from app.ingestion import LoadLimits, chunk_pages, load_with_timeout
from app.ingestion.normalise import MAX_LABEL_CHARS, normalise_label
from app.storage.chunks import ChunkStore
from app.storage.db import Database
from testkit.builders import (
    BILLION_LAUGHS,
    BILLION_LAUGHS_REF,
    docx_document,
    external_dtd,
    external_entity,
    pptx_document,
    with_entity,
)
from tests.large_pdf import large_uncompressed_pdf

pytestmark = pytest.mark.integration

MB = 1024 * 1024


def _big_xlsx(path: Path, rows: int) -> Path:
    book = Workbook(write_only=True)
    sheet = book.create_sheet("Data")
    for r in range(rows):
        sheet.append([r, f"item {r}", r * 1.5, "spare part", r % 7])
    book.save(path)
    return path


def test_a_file_over_the_memory_limit_fails_as_too_complex(tmp_path: Path) -> None:
    pdf = tmp_path / "manual.pdf"
    pdf.write_bytes(large_uncompressed_pdf(pages=200))
    # The default limit parses it; an address space below what parsing needs does not.
    assert len(load_with_timeout(pdf, LoadLimits(max_memory_bytes=2048 * MB), 60)) == 200
    with pytest.raises(DocumentTooComplex) as refused:
        load_with_timeout(pdf, LoadLimits(max_memory_bytes=64 * MB), 60)
    assert refused.value.code == "document_too_complex"
    assert "64 MB of memory" in refused.value.message


def test_a_file_over_the_cpu_limit_fails_as_too_complex(tmp_path: Path) -> None:
    # ~2.5 s of CPU for openpyxl here: well over a 1 s limit, far under the wall-clock timeout.
    sheet = _big_xlsx(tmp_path / "inventory.xlsx", 40_000)
    with pytest.raises(DocumentTooComplex) as refused:
        load_with_timeout(sheet, LoadLimits(max_cpu_s=1), 60)
    assert "1 s of CPU time" in refused.value.message


def test_a_damaged_file_under_the_limits_is_still_reported_as_damaged(tmp_path: Path) -> None:
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer <<>>\n%%EOF")
    with pytest.raises(CorruptDocument) as refused:
        load_with_timeout(broken, LoadLimits(max_memory_bytes=2048 * MB, max_cpu_s=30), 60)
    assert not isinstance(refused.value, DocumentTooComplex)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Cafe\u0301", "Café"),  # decomposed -> NFC
        ("  A-\t\n 1  ", "A- 1"),  # whitespace collapsed
        ("iv\u202e\u200b\x00\x07", "iv"),  # bidi override, zero-width space, controls
        ("x" * 200, "x" * MAX_LABEL_CHARS),
    ],
)
def test_labels_are_normalised_and_truncated(raw: str, expected: str) -> None:
    assert normalise_label(raw) == expected


def test_pdf_page_labels_and_sheet_titles_fit_the_label_column(
    tmp_path: Path, sql_database: Database
) -> None:
    hostile = "Cafe\u0301\u202e  \t Annex\u200b " + "Z" * 120
    pdf = pdf_from_pages(tmp_path / "annex.pdf", [["Annex text on the first page."]])

    def labels(writer: PdfWriter) -> None:
        writer.set_page_label(0, 0, style=PageLabelStyle.DECIMAL, prefix=hostile, start=1)

    relabel(pdf, labels)
    book = Workbook()
    book.active.title = "Q3  re\u0301sultats"  # type: ignore[union-attr]
    long_title = "Inventory " + "W" * 20  # Excel's own cap is 31 characters
    sheet = book.create_sheet(long_title)
    sheet.append(["part", "count"])
    for row in range(40):
        sheet.append([f"part {row} " + "long description " * 6, row])
    book.active.append(["metric", "value"])  # type: ignore[union-attr]
    book.active.append(["revenue", 12])  # type: ignore[union-attr]
    xlsx = tmp_path / "report.xlsx"
    book.save(xlsx)

    chunks = []
    for path in (pdf, xlsx):
        pages = load_with_timeout(path, LoadLimits(), 60)
        chunks += chunk_pages(
            pages,
            tenant_id="acme",
            document_id=f"doc_{path.stem}",
            source=path.name,
            chunk_size=300,
            chunk_overlap=30,
        )
    labels_seen = {chunk.page_label for chunk in chunks}
    pdf_label = next(c.page_label for c in chunks if c.source == "annex.pdf")
    assert pdf_label.startswith("Café Annex ZZZ") and len(pdf_label) == MAX_LABEL_CHARS
    assert "Q3 résultats row 2" in labels_seen
    assert any(label.startswith(long_title + " rows ") for label in labels_seen)
    for label in labels_seen:
        assert len(label) <= MAX_LABEL_CHARS
        assert unicodedata.is_normalized("NFC", label)
        assert not any(unicodedata.category(ch).startswith("C") for ch in label)
    # They are stored as they are in the VARCHAR(64) column (PostgreSQL would refuse longer).
    store = ChunkStore(sql_database)
    for path in (pdf, xlsx):
        mine = [c for c in chunks if c.source == path.name]
        store.write_documents("acme", {mine[0].document_id: mine})
    back = store.get("acme", [c.id for c in chunks])
    assert {c.page_label for c in back} == labels_seen


def test_openpyxl_parses_xml_with_defusedxml() -> None:
    import openpyxl.xml

    assert openpyxl.xml.DEFUSEDXML is True


def test_an_xlsx_with_an_entity_bomb_is_refused(tmp_path: Path) -> None:
    sheet = _big_xlsx(tmp_path / "plain.xlsx", 3)
    bomb = tmp_path / "bomb.xlsx"
    # openpyxl writes no XML declaration: the DOCTYPE must open the part to be one.
    bomb.write_bytes(
        with_entity(sheet.read_bytes(), "xl/workbook.xml", BILLION_LAUGHS, "Data", "&lol9;")
    )
    with pytest.raises(IngestionError) as refused:
        load_with_timeout(bomb, LoadLimits(), 60)
    assert refused.value.code == "suspicious_archive" and "DTD" in refused.value.message


# Where each format keeps its visible text, and a plain document of it.
OFFICE = {
    "docx": ("word/document.xml", lambda text: docx_document(text)),
    "pptx": ("ppt/slides/slide1.xml", lambda text: pptx_document(text)),
}
SECRET = "Zq7-host-secret-41d9"


def _attacks(secret_file: Path) -> dict[str, tuple[str, str]]:
    return {
        "billion-laughs": (BILLION_LAUGHS, BILLION_LAUGHS_REF),
        "external-entity": (external_entity(str(secret_file)), "&xxe;"),
        "external-dtd": (external_dtd(str(secret_file)), ""),
    }


@pytest.mark.parametrize("attack", ["billion-laughs", "external-entity", "external-dtd"])
@pytest.mark.parametrize("kind", sorted(OFFICE))
def test_a_docx_or_pptx_declaring_entities_is_refused_unexpanded(
    tmp_path: Path, kind: str, attack: str
) -> None:
    secret_file = tmp_path / "hostname"
    secret_file.write_text(SECRET)
    part, build = OFFICE[kind]
    plain = tmp_path / f"plain.{kind}"
    plain.write_bytes(build("Pump P-7 is serviced yearly."))
    # The same file without the DOCTYPE is read: the refusal is the entity's doing.
    assert "Pump P-7" in load_with_timeout(plain, LoadLimits(), 60)[0].text
    doctype, reference = _attacks(secret_file)[attack]
    hostile = tmp_path / f"hostile.{kind}"
    hostile.write_bytes(
        with_entity(plain.read_bytes(), part, doctype, "serviced yearly", f"serviced {reference}")
    )
    with pytest.raises(IngestionError) as refused:
        load_with_timeout(hostile, LoadLimits(), 60)
    message = refused.value.message
    assert refused.value.code == "suspicious_archive", message
    assert kind.upper() in message and "DTD" in message
    assert SECRET not in message and "lollol" not in message
