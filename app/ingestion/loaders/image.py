"""PNG, JPEG, TIFF (every frame) and WebP uploads: one page per image or frame, read by OCR.

Sizes are checked from the file's header before any pixel is decoded: a frame with more pixels
than RAG_OCR_MAX_IMAGE_PIXELS (a decompression bomb) refuses the file, as do frames holding more
than RAG_OCR_MAX_TOTAL_PIXELS together (many large frames, each under the first cap) and more
frames than RAG_OCR_MAX_PAGES.
"""

from __future__ import annotations

import warnings
from functools import partial
from pathlib import Path

from PIL import Image, ImageOps, UnidentifiedImageError

from app.domain import Page
from app.errors import CorruptDocument, DocumentTooLarge, UnsupportedFileType
from app.ingestion.ocr import layout_text, ocr_picture, ocr_status, unavailable
from app.ingestion.ocr_pdf import check_ocr_budget
from app.ingestion.ocr_progress import ocr_page, report_ocr
from app.ingestion.ocr_result import require_readable, unreadable_page
from app.ingestion.parse_limits import CharBudget, LoadLimits, check_page_count

# Formats Pillow may report for each extension we accept (MPO: a JPEG from a phone camera).
FORMATS: dict[str, frozenset[str]] = {
    ".png": frozenset({"PNG"}),
    ".jpg": frozenset({"JPEG", "MPO"}),
    ".jpeg": frozenset({"JPEG", "MPO"}),
    ".tif": frozenset({"TIFF"}),
    ".tiff": frozenset({"TIFF"}),
    ".webp": frozenset({"WEBP"}),
}
# Resolution assumed for an image that does not say (phone photos and screenshots rarely do).
_DEFAULT_DPI = 300


def _too_many_pixels(width: int, height: int, limit: int) -> DocumentTooLarge:
    return DocumentTooLarge(
        f"the image is {width} x {height} pixels, more than the limit of {limit / 1e6:g} "
        "megapixels; scale it down or split it and upload it again"
    )


def _check_pixels(image: Image.Image, frames: int, limits: LoadLimits) -> None:
    """Every frame's size and their sum against the caps, from the headers, before decoding."""
    cap, total_cap = limits.ocr.max_image_pixels, limits.ocr.max_total_pixels
    total = 0
    for index in range(frames):
        image.seek(index)
        width, height = image.size
        if width * height > cap:
            raise _too_many_pixels(width, height, cap)
        total += width * height
    if total > total_cap:
        raise DocumentTooLarge(
            f"the image's {frames} frames hold {total / 1e6:,.0f} megapixels together, more "
            f"than the limit of {total_cap / 1e6:,.0f} megapixels per file; split it into "
            "smaller files or scan it at a lower resolution, and upload it again"
        )


def _open(path: Path, limits: LoadLimits) -> Image.Image:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(path)  # reads the header only
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise DocumentTooLarge(
            "the image has far more pixels than the limit; it may be a decompression bomb"
        ) from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise CorruptDocument(
            f"the {path.suffix.lower()} file is not a readable image; it may be damaged. "
            "Save it again from an image editor and upload it"
        ) from exc
    expected = FORMATS.get(path.suffix.lower(), frozenset())
    if image.format not in expected:
        image.close()
        raise UnsupportedFileType(
            f"the file is named {path.suffix.lower()} but holds "
            f"{image.format or 'an unknown format'}; upload PNG, JPEG, TIFF or WebP images "
            "with their own extension"
        )
    return image


def _frame_dpi(image: Image.Image) -> int:
    dpi = image.info.get("dpi")
    try:
        value = round(float(dpi[0])) if dpi else _DEFAULT_DPI
    except (TypeError, ValueError, IndexError):
        value = _DEFAULT_DPI
    return value if 70 <= value <= 1200 else _DEFAULT_DPI


def load_image(path: Path, limits: LoadLimits) -> list[Page]:
    """One Page per image frame, its text read by OCR; labels are the frame numbers."""
    image = _open(path, limits)
    try:
        frames = getattr(image, "n_frames", 1)
        check_page_count(frames, limits, "frames")
        check_ocr_budget(frames, limits.ocr, "frames")
        _check_pixels(image, frames, limits)
        problem = ocr_status(limits.ocr.tesseract_cmd)
        if problem is not None:
            raise unavailable("the image has no text layer")
        budget = CharBudget(limits)
        pages: list[Page] = []
        report_ocr(0, frames)
        for index in range(frames):
            image.seek(index)
            try:
                image.load()
            except (OSError, ValueError, SyntaxError) as exc:
                raise CorruptDocument(
                    f"frame {index + 1} of the image cannot be decoded; it may be damaged. "
                    "Save it again from an image editor and upload it"
                ) from exc
            # A phone photo is stored sideways with an EXIF orientation: read it upright (the
            # kept picture is turned the same way, so the word boxes match it).
            upright = ImageOps.exif_transpose(image)
            read = partial(ocr_picture, upright, _frame_dpi(image), limits.ocr)
            layout = ocr_page(index, read)
            number = index + 1
            if layout.problem is not None:
                pages.append(unreadable_page(number, str(number), layout))
            else:
                text = budget.spend(layout_text(layout))
                pages.append(Page(number=number, label=str(number), text=text, ocr=layout))
            report_ocr(number, frames)
    finally:
        image.close()
    require_readable(pages, "image")
    return pages
