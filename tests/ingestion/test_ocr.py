"""OCR with the real Tesseract: scanned PDF pages and image uploads in English and Arabic, mixed
PDFs, and the limits (pixel bombs, too many pages, unreadable pages, Tesseract missing)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from ingestion_builders import relabel
from PIL import Image
from pypdf import PdfWriter
from pypdf.constants import PageLabelStyle

from app.errors import (
    CorruptDocument,
    DocumentTooLarge,
    NeedsOCR,
    OcrQuotaExceeded,
    UnreadableScan,
    UnsupportedFileType,
)
from app.ingestion import LoadLimits, chunk_pages, load, load_with_timeout
from app.ingestion.ocr_result import is_unreadable, ocr_warnings
from tests.scans import SANS, image_bytes, scanned_page, scanned_pdf

ENGLISH = [
    "The maintenance schedule for the north pumping station",
    "requires inspection code ZEBRA-4417 every spring.",
    "Operators record pressure readings twice a day.",
]
ARABIC = [
    "يجب على المشغلين تسجيل قراءات الضغط مرتين يوميا",
    "تقع محطة الضخ الشمالية بالقرب من النهر الكبير",
    "ويستخدم الجهاز ZEBRA-4417 لقياس التدفق",
]
TEXT_PAGE = "This page has a real text layer about the harbour crane and its winch cables."
MISSING_TESSERACT = "/nonexistent/bin/tesseract"


def _write(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def _with_ocr(limits: LoadLimits, **changes: object) -> LoadLimits:
    return replace(limits, ocr=replace(limits.ocr, **changes))


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_scanned_english_pdf_page_is_read_with_its_words_and_confidence(
    tmp_path: Path, limits: LoadLimits
) -> None:
    path = _write(tmp_path, "scan.pdf", scanned_pdf([scanned_page(ENGLISH)]))
    (page,) = load(path, limits)
    assert page.number == 1 and page.ocr is not None
    assert "inspection code ZEBRA-4417 every spring" in _flat(page.text)
    assert page.ocr.script == "latin" and page.ocr.confidence > 85
    assert [line for line in page.text.split("\n") if line] == ENGLISH  # line by line
    (chunk,) = chunk_pages(
        [page], tenant_id="t", document_id="d", source="scan.pdf", chunk_size=800, chunk_overlap=80
    )
    assert chunk.metadata["text_source"] == "ocr"
    assert 85 < int(chunk.metadata["ocr_confidence"]) <= 100


def test_an_arabic_image_is_read_in_logical_order_keeping_a_latin_code(
    tmp_path: Path, limits: LoadLimits
) -> None:
    picture = scanned_page(ARABIC, font=SANS, rtl=True)
    path = _write(tmp_path, "scan.png", image_bytes([picture], "PNG"))
    (page,) = load(path, limits)
    assert page.ocr is not None and page.ocr.script in {"arabic", "mixed"}
    text = _flat(page.text)
    assert "تسجيل قراءات الضغط" in text  # logical order: the words as typed
    assert "ZEBRA-4417" in text
    assert "\u200e" not in page.text and "\u200f" not in page.text  # no direction marks


def test_a_mixed_pdf_reads_only_its_image_page_by_ocr(tmp_path: Path, limits: LoadLimits) -> None:
    content = scanned_pdf([TEXT_PAGE, scanned_page(ENGLISH), TEXT_PAGE.replace("crane", "dock")])
    pages = load(_write(tmp_path, "mixed.pdf", content), limits)
    assert [page.number for page in pages] == [1, 2, 3]
    assert [page.ocr is not None for page in pages] == [False, True, False]
    assert "ZEBRA-4417" in pages[1].text and "harbour crane" in pages[0].text


def test_every_frame_of_a_tiff_is_a_page_and_progress_is_reported(
    tmp_path: Path, limits: LoadLimits
) -> None:
    frames = [scanned_page(ENGLISH[:1]), scanned_page(["Second frame names code OSPREY-2290."])]
    path = _write(tmp_path, "fax.tiff", image_bytes(frames, "TIFF", compression="tiff_lzw"))
    seen: list[tuple[int, int]] = []
    pages = load_with_timeout(path, limits, 120, lambda done, total: seen.append((done, total)))
    assert [page.label for page in pages] == ["1", "2"]
    assert "OSPREY-2290" in pages[1].text
    assert seen == [(0, 2), (1, 2), (2, 2)]


def test_jpeg_and_webp_images_are_read(tmp_path: Path, limits: LoadLimits) -> None:
    picture = scanned_page(ENGLISH)
    for name, fmt in (("photo.jpg", "JPEG"), ("photo.webp", "WEBP")):
        (page,) = load(_write(tmp_path, name, image_bytes([picture], fmt, quality=80)), limits)
        assert "ZEBRA-4417" in page.text, name


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG that declares `width` x `height` pixels but holds almost no data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 64)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("side", [9_000, 60_000])  # over our cap; over Pillow's bomb limit too
def test_a_pixel_bomb_is_refused_before_decoding(
    tmp_path: Path, limits: LoadLimits, side: int
) -> None:
    path = _write(tmp_path, "bomb.png", _png_header_only(side, side))
    with pytest.raises(DocumentTooLarge, match="pixels"):
        load(path, limits)


def test_frames_over_the_total_pixel_cap_are_refused_before_ocr(
    tmp_path: Path, limits: LoadLimits
) -> None:
    # Each frame is under the per-frame cap; together they are not. Tesseract is never run
    # (a missing one would be named instead), so the refusal comes before any decoding.
    frame = Image.new("L", (3000, 3000), 255)
    path = _write(tmp_path, "scans.tiff", image_bytes([frame] * 3, "TIFF"))
    tight = _with_ocr(
        limits, max_image_pixels=10_000_000, max_total_pixels=20_000_000, tesseract_cmd="none"
    )
    with pytest.raises(
        DocumentTooLarge, match="3 frames hold 27 megapixels together, more than the limit of 20"
    ):
        load(path, tight)
    # At the cap exactly, the frames are read (blank: nothing found on them).
    small = _write(
        tmp_path, "small.tiff", image_bytes([Image.new("L", (1000, 1000), 255)] * 3, "TIFF")
    )
    with pytest.raises(UnreadableScan, match="pages 1, 2, 3"):
        load(small, _with_ocr(limits, max_total_pixels=3_000_000))


def test_too_many_frames_or_scanned_pages_are_refused_before_ocr(
    tmp_path: Path, limits: LoadLimits
) -> None:
    small = Image.new("L", (200, 200), 255)
    tiff = _write(tmp_path, "many.tiff", image_bytes([small] * 3, "TIFF"))
    with pytest.raises(DocumentTooLarge, match="3 frames to OCR, more than the limit of 2"):
        load(tiff, _with_ocr(limits, max_pages=2))
    pdf = _write(tmp_path, "many.pdf", scanned_pdf([small, small, small], dpi=30))
    with pytest.raises(OcrQuotaExceeded, match="3 pages to OCR, 1 remain"):
        load(pdf, _with_ocr(limits, pages_allowed=1))


def test_an_unreadable_page_is_listed_and_the_rest_is_kept(
    tmp_path: Path, limits: LoadLimits
) -> None:
    blank_scan = Image.new("L", (2481, 3508), 255)
    content = scanned_pdf([scanned_page(ENGLISH), blank_scan])
    pages = load(_write(tmp_path, "partly.pdf", content), limits)
    assert [is_unreadable(page) for page in pages] == [False, True]
    assert ocr_warnings(pages) == ["page 2 could not be read: no text was found on it"]


def test_a_scan_with_nothing_readable_fails_naming_its_pages(
    tmp_path: Path, limits: LoadLimits
) -> None:
    blank_scan = Image.new("L", (1240, 1754), 255)
    path = _write(tmp_path, "blank.pdf", scanned_pdf([blank_scan, blank_scan], dpi=150))
    with pytest.raises(UnreadableScan, match="OCR failed on pages 1, 2"):
        load(path, limits)


def test_without_tesseract_a_scan_is_refused_with_the_install_hint(
    tmp_path: Path, limits: LoadLimits
) -> None:
    missing = _with_ocr(limits, tesseract_cmd=MISSING_TESSERACT)
    scan = _write(tmp_path, "scan.pdf", scanned_pdf([scanned_page(ENGLISH)]))
    with pytest.raises(NeedsOCR, match=r"no extractable text.*install tesseract-ocr"):
        load(scan, missing)
    image = _write(tmp_path, "scan.png", image_bytes([scanned_page(ENGLISH)], "PNG"))
    with pytest.raises(NeedsOCR, match="install tesseract-ocr"):
        load(image, missing)
    mixed = _write(tmp_path, "mixed.pdf", scanned_pdf([TEXT_PAGE, scanned_page(ENGLISH)]))
    pages = load(mixed, missing)
    assert ocr_warnings(pages) == ["page 2 could not be read: OCR is not available"]


def test_corrupt_and_mislabelled_images_are_refused(tmp_path: Path, limits: LoadLimits) -> None:
    good_png = image_bytes([scanned_page(ENGLISH[:1], dpi=100)], "PNG")
    with pytest.raises(CorruptDocument, match="not a readable image"):
        load(_write(tmp_path, "junk.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 200), limits)
    with pytest.raises(CorruptDocument, match="cannot be decoded"):
        load(_write(tmp_path, "cut.png", good_png[: len(good_png) // 2]), limits)
    with pytest.raises(UnsupportedFileType, match=r"named \.jpg but holds PNG"):
        load(_write(tmp_path, "fake.jpg", good_png), limits)


def test_scanned_pages_keep_their_printed_labels(tmp_path: Path, limits: LoadLimits) -> None:
    content = scanned_pdf([scanned_page(["Preface of the survey."]), scanned_page(ENGLISH)])
    path = _write(tmp_path, "labelled.pdf", content)

    def labels(writer: PdfWriter) -> None:
        writer.set_page_label(0, 0, style=PageLabelStyle.LOWERCASE_ROMAN, start=4)
        writer.set_page_label(1, 1, style=PageLabelStyle.DECIMAL, prefix="A-", start=1)

    pages = load(relabel(path, labels), limits)
    assert [(page.number, page.label) for page in pages] == [(1, "iv"), (2, "A-1")]
    assert all(page.ocr is not None for page in pages)


def test_a_page_over_the_ocr_time_limit_is_stopped_and_named(
    tmp_path: Path, limits: LoadLimits
) -> None:
    path = _write(tmp_path, "slow.pdf", scanned_pdf([scanned_page(ENGLISH)]))
    with pytest.raises(
        UnreadableScan, match=r"OCR failed on page 1 \(OCR took longer than 0.05 s\)"
    ):
        load(path, _with_ocr(limits, page_timeout_s=0.05))


def test_a_sideways_phone_photo_is_read_upright(tmp_path: Path, limits: LoadLimits) -> None:
    sideways = scanned_page(ENGLISH, dpi=150).rotate(90, expand=True)  # as the camera stored it
    exif = Image.Exif()
    exif[0x0112] = 6  # "turn 90 degrees clockwise to view"
    path = _write(tmp_path, "photo.jpg", image_bytes([sideways], "JPEG", quality=90, exif=exif))
    (page,) = load(path, limits)
    assert "inspection code ZEBRA-4417" in _flat(page.text)
    assert page.ocr is not None and page.ocr.height > page.ocr.width  # the portrait page
