"""Render one PDF page to PNG with PDFium, drawing a highlight over a passage's text."""

from __future__ import annotations

import io
import multiprocessing
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image, ImageDraw

from app.child_process import stop_child
from app.rendering.passage import KeyedText, keyed, locate

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


class UnreadablePdf(ValueError):
    """PDFium cannot open or render the file."""


@dataclass(frozen=True)
class Passage:
    """What to highlight: the chunk's text and where it starts in its page (0..1)."""

    text: str
    position_hint: float = 0.0


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


def render_page(
    path: Path, page_number: int, max_side_px: int, passage: Passage | None = None
) -> RenderedPage:
    """PNG of 1-based `page_number`, its longest side at most `max_side_px` pixels."""
    with _PDFIUM_LOCK:
        try:
            document = pdfium.PdfDocument(path)
        except pdfium.PdfiumError as exc:
            raise UnreadablePdf(str(exc)) from exc
        try:
            count = len(document)
            if not 1 <= page_number <= count:
                raise PageOutOfRange(count)
            page = document[page_number - 1]
            width, height = page.get_size()
            scale = min(_MAX_SCALE, max_side_px / max(width, height, 1.0))
            # Boxes are drawn for unrotated pages only; a rotated page is shown without them.
            rotated = page.get_rotation() % 360 != 0
            boxes = _passage_boxes(page, passage) if passage and not rotated else []
            page_box = page.get_bbox()  # the visible box; get_cropbox misses inherited boxes
            image = page.render(scale=scale).to_pil()
            page.close()
        except pdfium.PdfiumError as exc:
            raise UnreadablePdf(str(exc)) from exc
        finally:
            document.close()
    top = None
    if boxes:
        image = _draw(image, boxes, page_box, scale)
        page_top, page_height = page_box[3], page_box[3] - page_box[1]
        top = max(0.0, min(1.0, (page_top - max(box[3] for box in boxes)) / page_height))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False)
    return RenderedPage(buffer.getvalue(), image.width, image.height, len(boxes), top)


# Rendering runs in a child process, like parsing (app/ingestion/timeout.py): a hostile PDF that
# makes PDFium loop or crash costs one killed child, never the API process. forkserver, because
# forking a threaded server can deadlock the child; the child imports PDFium itself (~60 ms).
_CONTEXT = multiprocessing.get_context("forkserver")
_KILL_GRACE_S = 2.0
# At most this many renders at once per process; more requests wait for a turn (2 cores).
_RENDER_SLOTS = threading.BoundedSemaphore(2)


def _render_in_child(
    path: str, page_number: int, max_side_px: int, passage: Passage | None, conn: Connection
) -> None:
    try:
        conn.send(("ok", render_page(Path(path), page_number, max_side_px, passage)))
    except PageOutOfRange as exc:
        conn.send(("out_of_range", exc.page_count))
    except BaseException as exc:  # reported, never lost with the child
        conn.send(("unreadable", str(exc) or type(exc).__name__))
    finally:
        conn.close()


def render_page_isolated(
    path: Path,
    page_number: int,
    max_side_px: int,
    passage: Passage | None = None,
    timeout_s: float = 20.0,
) -> RenderedPage:
    """`render_page` in a child process killed after `timeout_s` (UnreadablePdf then)."""
    with _RENDER_SLOTS:
        receiver, sender = _CONTEXT.Pipe(duplex=False)
        process = _CONTEXT.Process(
            target=_render_in_child,
            args=(str(path), page_number, max_side_px, passage, sender),
            name="rag-render",
            daemon=True,
        )
        process.start()
        sender.close()  # a dead child then reads as end-of-file
        try:
            if not receiver.poll(timeout_s):
                raise UnreadablePdf(f"rendering took longer than {timeout_s:g} s and was stopped")
            try:
                message = receiver.recv()
            except EOFError:
                raise UnreadablePdf("the renderer stopped unexpectedly on this file") from None
        finally:
            receiver.close()
            process.join(_KILL_GRACE_S)
            if process.is_alive():
                stop_child(process, _KILL_GRACE_S)
    if message[0] == "ok":
        rendered: RenderedPage = message[1]
        return rendered
    if message[0] == "out_of_range":
        raise PageOutOfRange(message[1])
    raise UnreadablePdf(message[1])
