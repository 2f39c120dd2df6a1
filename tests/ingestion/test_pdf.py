"""PDF loading: 1-based pages, printed labels, and each kind of bad PDF."""

from __future__ import annotations

from pathlib import Path

import pytest
from fpdf import FPDF
from ingestion_builders import pdf_from_pages, relabel, roman_front_matter_pdf
from pypdf import PdfReader, PdfWriter
from pypdf.constants import PageLabelStyle
from pypdf.errors import PdfReadError

from app.errors import CorruptDocument, DocumentTooLarge, EmptyDocument, EncryptedDocument, NeedsOCR
from app.ingestion import LoadLimits, chunk_pages, load
from testkit.builders import encrypted_pdf

pytestmark = pytest.mark.unit


def test_roman_front_matter_keeps_printed_labels_and_1_based_pages(
    tmp_path: Path, limits: LoadLimits
) -> None:
    path = roman_front_matter_pdf(tmp_path / "book.pdf")
    pages = load(path, limits)
    assert [(p.number, p.label) for p in pages] == [
        (1, "i"),
        (2, "ii"),
        (3, "iii"),
        (4, "1"),
        (5, "2"),
        (6, "3"),
        (7, "4"),
    ]
    assert "Chapter one" in pages[3].text
    assert "Front matter page one" in pages[0].text
    chunks = chunk_pages(
        pages, tenant_id="t", document_id="d", source="book.pdf", chunk_size=200, chunk_overlap=20
    )
    chapter_one = next(c for c in chunks if "Chapter one" in c.text)
    assert (chapter_one.page, chapter_one.page_label) == (4, "1")


def test_prefixed_labels_like_appendix_pages(tmp_path: Path, limits: LoadLimits) -> None:
    path = pdf_from_pages(
        tmp_path / "a.pdf", [["Body one"], ["Appendix first"], ["Appendix second"]]
    )

    def labels(writer: PdfWriter) -> None:
        writer.set_page_label(0, 0, style=PageLabelStyle.DECIMAL, start=1)
        writer.set_page_label(1, 2, style=PageLabelStyle.DECIMAL, prefix="A-", start=1)

    relabel(path, labels)
    assert [p.label for p in load(path, limits)] == ["1", "A-1", "A-2"]


def test_pdf_without_labels_falls_back_to_page_numbers(tmp_path: Path, limits: LoadLimits) -> None:
    path = pdf_from_pages(tmp_path / "plain.pdf", [["first"], ["second"], ["third"]])
    assert PdfReader(path).trailer["/Root"].get("/PageLabels") is None
    assert [(p.number, p.label) for p in load(path, limits)] == [(1, "1"), (2, "2"), (3, "3")]


def test_blank_pages_are_skipped_but_numbering_stays_true(
    tmp_path: Path, limits: LoadLimits
) -> None:
    path = pdf_from_pages(tmp_path / "gap.pdf", [["first"], [], ["third"]])
    assert [(p.number, p.text) for p in load(path, limits)] == [(1, "first"), (3, "third")]


@pytest.mark.parametrize(
    "content",
    [
        b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\ngarbage without xref or trailer",
        b"this is not a pdf at all, just some words in a file named .pdf",
    ],
    ids=["broken-structure", "not-a-pdf"],
)
def test_corrupt_pdf_is_a_typed_error(tmp_path: Path, limits: LoadLimits, content: bytes) -> None:
    path = tmp_path / "bad.pdf"
    path.write_bytes(content)
    with pytest.raises(CorruptDocument, match="damaged"):
        load(path, limits)


def test_truncated_pdf_is_a_typed_error(tmp_path: Path, limits: LoadLimits) -> None:
    good = pdf_from_pages(tmp_path / "good.pdf", [["some text here"]] * 3)
    path = tmp_path / "truncated.pdf"
    path.write_bytes(good.read_bytes()[: good.stat().st_size // 3])
    # pypdf itself raises its own exception types here; load() must translate them.
    with pytest.raises(PdfReadError):
        PdfReader(path, strict=True).pages[2].extract_text()
    with pytest.raises(CorruptDocument):
        load(path, limits)


def test_password_protected_pdf_is_refused(tmp_path: Path, limits: LoadLimits) -> None:
    path = tmp_path / "locked.pdf"
    path.write_bytes(encrypted_pdf("secret text"))
    with pytest.raises(EncryptedDocument, match="password"):
        load(path, limits)


def test_pdf_with_only_an_owner_password_is_readable(tmp_path: Path, limits: LoadLimits) -> None:
    source = pdf_from_pages(tmp_path / "plain.pdf", [["readable by anyone"]])
    writer = PdfWriter(clone_from=PdfReader(source))
    writer.encrypt(user_password="", owner_password="owner", algorithm="AES-128")
    path = tmp_path / "owner-only.pdf"
    writer.write(path)
    assert PdfReader(path).is_encrypted
    assert load(path, limits)[0].text == "readable by anyone"


def test_pdf_without_text_layer_needs_ocr(tmp_path: Path, limits: LoadLimits) -> None:
    pdf = FPDF()
    for _ in range(2):
        pdf.add_page()
        pdf.rect(20, 20, 100, 60, style="F")  # a "scanned" page: graphics, no text
    path = tmp_path / "scan.pdf"
    pdf.output(str(path))
    with pytest.raises(NeedsOCR, match="no extractable text; it needs OCR"):
        load(path, limits)


def test_empty_pdf_file_is_empty_document(tmp_path: Path, limits: LoadLimits) -> None:
    path = tmp_path / "empty.pdf"
    path.write_bytes(b"")
    with pytest.raises(EmptyDocument):
        load(path, limits)


def test_page_cap_is_enforced_before_any_page_is_extracted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = pdf_from_pages(tmp_path / "long.pdf", [[f"page {n}"] for n in range(5)])
    extracted: list[int] = []

    def counting_extract(page: object, *args: object, **kwargs: object) -> str:
        extracted.append(1)
        return "x"

    monkeypatch.setattr("pypdf._page.PageObject.extract_text", counting_extract)
    with pytest.raises(DocumentTooLarge, match="5 pages, more than the limit of 4"):
        load(path, LoadLimits(max_pages=4))
    assert extracted == []


def test_character_cap_stops_extraction(tmp_path: Path) -> None:
    path = pdf_from_pages(tmp_path / "wordy.pdf", [["word " * 30] for _ in range(4)])
    assert len(load(path, LoadLimits())) == 4
    with pytest.raises(DocumentTooLarge, match="characters"):
        load(path, LoadLimits(max_chars=200))
