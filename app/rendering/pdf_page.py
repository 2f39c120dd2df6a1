"""Render one PDF page to PNG with PDFium, drawing a highlight over a passage's text.

Sizes are checked before PDFium decodes anything: the picture's pixels (page size times scale)
and the pixels of the images embedded in the page, so a page whose images would decode to
gigabytes is refused with `PageRenderFailed("too_large")` instead of exhausting memory.
"""

from __future__ import annotations

import ctypes
import io
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image, ImageDraw

from app.domain import OcrLayout
from app.rendering.ocr_layouts import PixelBox, passage_word_boxes
from app.rendering.passage import KeyedText, keyed, locate

if TYPE_CHECKING:
    from app.config import Settings

# PDFium is not thread-safe: every call into it, from any request thread, goes through this.
_PDFIUM_LOCK = threading.Lock()
# Never upscale past 2x (72 dpi -> 144 dpi): larger adds bytes, not legibility.
_MAX_SCALE = 2.0
_HIGHLIGHT_RGBA = (255, 214, 0, 110)  # translucent yellow: the text stays readable under it
_HIGHLIGHT_PAD_PX = 2


class PageOutOfRange(ValueError):
    """The page number is not in the PDF; `page_count` says how many it has."""

    def __init__(self, page_count: int) -> None:
        super().__init__(f"the document has {page_count} page(s)")
        self.page_count = page_count


RenderFailure = Literal["unreadable", "timeout", "too_complex", "too_large"]


class PageRenderFailed(ValueError):
    """The page cannot be drawn; `reason` says why and the message is safe to show a user."""

    def __init__(self, reason: RenderFailure, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


UNREADABLE = "the PDF page could not be drawn; the file may be damaged"
TOO_COMPLEX = "drawing this PDF page needed more memory or CPU time than allowed and was stopped"


@dataclass(frozen=True)
class RenderLimits:
    """Bounds on drawing one page: the picture's longest side, the pixels of the images
    embedded in the page, and the wall time, memory and CPU time of the child that draws it."""

    max_side_px: int = 1600
    max_image_pixels: int = 64_000_000
    timeout_s: float = 20.0
    max_memory_bytes: int | None = None
    max_cpu_s: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> RenderLimits:
        """RAG_PAGE_IMAGE_MAX_PX and the RAG_PAGE_RENDER_* bounds of the render child."""
        return cls(
            max_side_px=settings.page_image_max_px,
            max_image_pixels=settings.page_render_max_image_mp * 1_000_000,
            timeout_s=settings.page_render_timeout_s,
            max_memory_bytes=settings.page_render_max_memory_mb * 1024 * 1024,
            max_cpu_s=settings.page_render_max_cpu_s,
        )


@dataclass(frozen=True)
class Passage:
    """What to highlight: the chunk's text and where it starts in its page (0..1); on a page
    whose text was read by OCR, the words and boxes it read (`ocr`)."""

    text: str
    position_hint: float = 0.0
    ocr: OcrLayout | None = None


@dataclass(frozen=True)
class RenderedPage:
    """A PNG of one page and the number of boxes drawn over the passage (0 = not found)."""

    png: bytes
    width: int
    height: int
    highlight_boxes: int
    highlight_top: float | None = None  # the passage's top edge, as a fraction of the height


def _page_chars(text_page: pdfium.PdfTextPage) -> list[str]:
    # Character by character, so index i here is PDFium's char index i for its boxes.
    count = text_page.count_chars()
    return [chr(pdfium_c.FPDFText_GetUnicode(text_page.raw, i) or 32) for i in range(count)]


def _passage_boxes(
    page: pdfium.PdfPage, passage: Passage
) -> list[tuple[float, float, float, float]]:
    """The passage's text boxes in page coordinates (left, bottom, right, top)."""
    text_page = page.get_textpage()
    try:
        page_text: KeyedText = keyed(_page_chars(text_page))
        span = locate(page_text, passage.text, passage.position_hint)
        if span is None:
            return []
        first, last = span
        count = text_page.count_rects(first, last - first + 1)
        return [text_page.get_rect(i) for i in range(count)]
    finally:
        text_page.close()


def _draw(
    image: Image.Image,
    boxes: list[tuple[float, float, float, float]],
    page_box: tuple[float, float, float, float],
    scale: float,
) -> Image.Image:
    left0, _bottom0, _right0, top0 = page_box
    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    pen = ImageDraw.Draw(overlay)
    for left, bottom, right, top in boxes:
        pen.rectangle(
            (
                (left - left0) * scale - _HIGHLIGHT_PAD_PX,
                (top0 - top) * scale - _HIGHLIGHT_PAD_PX,
                (right - left0) * scale + _HIGHLIGHT_PAD_PX,
                (top0 - bottom) * scale + _HIGHLIGHT_PAD_PX,
            ),
            fill=_HIGHLIGHT_RGBA,
        )
    return Image.alpha_composite(image.convert("RGBA"), overlay).convert("RGB")


def _scale(page: pdfium.PdfPage, max_side_px: int) -> float:
    """The zoom that fits the page in `max_side_px`; refuses a size no picture can have."""
    width, height = page.get_size()
    scale = min(_MAX_SCALE, max_side_px / max(float(width), float(height), 1.0))
    pixels = (width * scale) * (height * scale)
    if not math.isfinite(pixels) or pixels > max_side_px * max_side_px:
        raise PageRenderFailed("too_large", "this PDF page's size cannot be drawn")
    return scale


# Forms may nest forms; deeper nesting than this is not followed when counting image pixels.
_MAX_FORM_DEPTH = 12


def embedded_image_pixels(objects: list[Any], limit: int) -> int:
    """Pixels of the images among page objects and inside their forms, stopping past `limit`.

    Read from each image's dictionary (its /Width and /Height), so nothing is decoded.
    """
    total = 0
    width, height = ctypes.c_uint(), ctypes.c_uint()
    stack: list[tuple[Any, int]] = [(handle, 0) for handle in objects]
    while stack and total <= limit:
        handle, depth = stack.pop()
        kind = pdfium_c.FPDFPageObj_GetType(handle)
        if kind == pdfium_c.FPDF_PAGEOBJ_IMAGE:
            if pdfium_c.FPDFImageObj_GetImagePixelSize(
                handle, ctypes.byref(width), ctypes.byref(height)
            ):
                total += width.value * height.value
        elif kind == pdfium_c.FPDF_PAGEOBJ_FORM and depth < _MAX_FORM_DEPTH:
            count = pdfium_c.FPDFFormObj_CountObjects(handle)
            stack.extend(
                (pdfium_c.FPDFFormObj_GetObject(handle, i), depth + 1) for i in range(count)
            )
    return total


def _check_images(page: pdfium.PdfPage, max_image_pixels: int) -> None:
    count = pdfium_c.FPDFPage_CountObjects(page.raw)
    objects = [pdfium_c.FPDFPage_GetObject(page.raw, i) for i in range(max(count, 0))]
    pixels = embedded_image_pixels(objects, max_image_pixels)
    if pixels > max_image_pixels:
        raise PageRenderFailed(
            "too_large",
            f"this PDF page holds images of more than {max_image_pixels / 1e6:g} megapixels, "
            "more than a page picture may decode",
        )


def _open(path: Path) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(path)
    except pdfium.PdfiumError as exc:
        raise PageRenderFailed("unreadable", UNREADABLE) from exc


def page_count(path: Path) -> int:
    """How many pages the PDF has (PageRenderFailed when PDFium cannot open it)."""
    with _PDFIUM_LOCK:
        document = _open(path)
        try:
            return len(document)
        finally:
            document.close()


def render_page(
    path: Path, page_number: int, limits: RenderLimits, passage: Passage | None = None
) -> RenderedPage:
    """PNG of 1-based `page_number`, its longest side at most `limits.max_side_px` pixels."""
    with _PDFIUM_LOCK:
        document = _open(path)
        try:
            count = len(document)
            if not 1 <= page_number <= count:
                raise PageOutOfRange(count)
            page = document[page_number - 1]
            scale = _scale(page, limits.max_side_px)
            _check_images(page, limits.max_image_pixels)
            # Text-layer boxes are drawn for unrotated pages only (a rotated page is shown
            # without them); OCR boxes are in the picture's own pixels, rotated or not.
            rotated = page.get_rotation() % 360 != 0
            ocr = passage.ocr if passage else None
            boxes = _passage_boxes(page, passage) if passage and not rotated and not ocr else []
            page_box = page.get_bbox()  # the visible box; get_cropbox misses inherited boxes
            image = page.render(scale=scale).to_pil()
            page.close()
        except pdfium.PdfiumError as exc:
            raise PageRenderFailed("unreadable", UNREADABLE) from exc
        finally:
            document.close()
    if passage is not None and ocr is not None:
        return _with_ocr_boxes(image, ocr, passage)
    top = None
    if boxes:
        image = _draw(image, boxes, page_box, scale)
        page_top, page_height = page_box[3], page_box[3] - page_box[1]
        top = max(0.0, min(1.0, (page_top - max(box[3] for box in boxes)) / page_height))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False)
    return RenderedPage(buffer.getvalue(), image.width, image.height, len(boxes), top)


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False)
    return buffer.getvalue()


def _with_ocr_boxes(image: Image.Image, layout: OcrLayout, passage: Passage) -> RenderedPage:
    """The picture with the passage's OCR word boxes, scaled from the OCR picture to this one."""
    found = passage_word_boxes(layout, passage.text, passage.position_hint)
    top = None
    if found and layout.width and layout.height:
        scale_x, scale_y = image.width / layout.width, image.height / layout.height
        scaled: list[PixelBox] = [
            (left * scale_x, top_ * scale_y, right * scale_x, bottom * scale_y)
            for left, top_, right, bottom in found
        ]
        image = _draw_pixels(image, scaled)
        top = max(0.0, min(1.0, min(box[1] for box in scaled) / image.height))
    return RenderedPage(_png(image), image.width, image.height, len(found), top)


def _draw_pixels(image: Image.Image, boxes: list[PixelBox]) -> Image.Image:
    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    pen = ImageDraw.Draw(overlay)
    for left, top, right, bottom in boxes:
        pen.rectangle(
            (
                left - _HIGHLIGHT_PAD_PX,
                top - _HIGHLIGHT_PAD_PX,
                right + _HIGHLIGHT_PAD_PX,
                bottom + _HIGHLIGHT_PAD_PX,
            ),
            fill=_HIGHLIGHT_RGBA,
        )
    return Image.alpha_composite(image.convert("RGBA"), overlay).convert("RGB")
