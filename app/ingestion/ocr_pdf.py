"""OCR for the PDF pages that have no usable text layer: found, rasterised with PDFium at the
configured resolution, and read by Tesseract, within the page and pixel caps.

A text layer is usable when it holds at least `MIN_TEXT_LAYER_CHARS` letters or digits. Below
that, a page that shows an image is OCR'd: a scan may carry a stray stamp or page number in
text, a page of prose carries hundreds of characters (a threshold chosen, not yet measured on a
corpus of real scans). A page with no image and no text stays a blank page.
"""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import pypdfium2 as pdfium

from app.domain import OcrLayout
from app.errors import DocumentTooLarge, OcrQuotaExceeded
from app.ingestion.ocr import ocr_picture
from app.ingestion.ocr_progress import ocr_page, report_ocr
from app.ingestion.parse_limits import OcrLimits
from app.rendering.pdf_page import embedded_image_pixels

MIN_TEXT_LAYER_CHARS = 20
# Below this resolution (a giant page shrunk to fit the pixel cap) text is too small to read.
_MIN_DPI = 100


def lacks_text_layer(text: str) -> bool:
    """Whether a page's extracted text is too little to stand for the page."""
    return sum(char.isalnum() for char in text) < MIN_TEXT_LAYER_CHARS


def check_ocr_budget(count: int, limits: OcrLimits, unit: str = "pages") -> None:
    """Refuse, before reading anything, a document with more pages to OCR than allowed."""
    if count > limits.max_pages:
        raise DocumentTooLarge(
            f"the document has {count} {unit} to OCR, more than the limit of "
            f"{limits.max_pages}; split it into smaller files and upload them separately"
        )
    if limits.pages_allowed is not None and count > limits.pages_allowed:
        raise OcrQuotaExceeded(
            f"tenant quota exceeded: OCR pages (this document has {count} {unit} to OCR, "
            f"{limits.pages_allowed} remain within the quota); delete scanned documents to "
            "make room"
        )


def _has_image(page: pdfium.PdfPage) -> bool:
    count = pdfium.raw.FPDFPage_CountObjects(page.raw)
    objects = [pdfium.raw.FPDFPage_GetObject(page.raw, i) for i in range(max(count, 0))]
    return embedded_image_pixels(objects, 0) > 0


def scanned_pages(path: Path, texts: list[str]) -> list[int]:
    """0-based indexes of the pages whose text layer is not usable and which show an image."""
    candidates = [index for index, text in enumerate(texts) if lacks_text_layer(text)]
    if not candidates:
        return []
    document = pdfium.PdfDocument(path)
    try:
        found = []
        for index in candidates:
            page = document[index]
            try:
                if _has_image(page):
                    found.append(index)
            finally:
                page.close()
        return found
    finally:
        document.close()


def _read_page(page: pdfium.PdfPage, limits: OcrLimits) -> OcrLayout:
    width_pt, height_pt = (float(side) for side in page.get_size())
    count = pdfium.raw.FPDFPage_CountObjects(page.raw)
    objects = [pdfium.raw.FPDFPage_GetObject(page.raw, i) for i in range(max(count, 0))]
    if embedded_image_pixels(objects, limits.max_image_pixels) > limits.max_image_pixels:
        return OcrLayout(
            0, 0, problem=f"its images hold more than {limits.max_image_pixels / 1e6:g} megapixels"
        )
    area_in2 = (width_pt / 72) * (height_pt / 72)
    if not math.isfinite(area_in2) or area_in2 <= 0:
        return OcrLayout(0, 0, problem="its page size cannot be drawn")
    # The configured resolution, lowered for a page so large its picture would pass the cap.
    dpi = min(float(limits.dpi), math.sqrt(limits.max_image_pixels / area_in2))
    if dpi < _MIN_DPI:
        return OcrLayout(0, 0, problem="the page is too large to OCR within the pixel limit")
    image = page.render(scale=dpi / 72, grayscale=True).to_pil()
    return ocr_picture(image, round(dpi), limits)


def ocr_pdf_pages(path: Path, indexes: list[int], limits: OcrLimits) -> dict[int, OcrLayout]:
    """0-based page index -> what OCR read there, for `indexes`, reporting progress per page."""
    check_ocr_budget(len(indexes), limits)
    layouts: dict[int, OcrLayout] = {}
    report_ocr(0, len(indexes))
    document = pdfium.PdfDocument(path)
    try:
        for done, index in enumerate(indexes, start=1):
            page = document[index]
            try:
                layouts[index] = ocr_page(index, partial(_read_page, page, limits))
            finally:
                page.close()
            report_ocr(done, len(indexes))
    finally:
        document.close()
    return layouts
