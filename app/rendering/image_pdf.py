"""An uploaded image (PNG, JPEG, TIFF with every frame, WebP) turned into the kept PDF, one page
per frame, so its pages are drawn like any PDF page.

Run in a limited child (`app.rendering.isolated.image_to_pdf_isolated`), never in the API or
worker process: the frames are user pixels, and a small file can decode to gigabytes (a TIFF of
blank deflate frames). The PDF is written frame by frame, so at most one decoded frame is in
memory, and the frames' sizes are checked against the OCR pixel caps from the header before each
one is decoded (the parse child refused the file already if they do not fit; this is the same
check again, on the same bytes, where it is cheap).
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from PIL import ExifTags, Image

from app.rendering.pdf_page import PageRenderFailed

# Resolution assumed for a frame that does not say, as the image loader assumes for OCR.
_DEFAULT_DPI = 300.0
# JPEG cannot hold a side longer than this; such a frame is stored deflated instead.
_JPEG_MAX_SIDE = 65_500
_GRAY_MODES = frozenset({"1", "L", "LA", "I", "I;16", "F"})
# EXIF orientation -> the turn that makes the picture upright (as ImageOps.exif_transpose).
_TURNS = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}


@dataclass(frozen=True)
class PixelCaps:
    """Pixels one frame and all frames of an image may decode to (RAG_OCR_MAX_IMAGE_PIXELS and
    RAG_OCR_MAX_TOTAL_PIXELS)."""

    per_frame: int
    total: int


class _PdfWriter:
    """Writes a PDF of full-page pictures to a file one page at a time; only each object's
    offset is remembered, never a page's pixels."""

    _CATALOG, _PAGES = 1, 2

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._offsets: dict[int, int] = {}
        self._page_ids: list[int] = []
        self._next_id = 3
        out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")

    def _object(self, number: int, head: bytes, stream: bytes | None = None) -> None:
        self._offsets[number] = self._out.tell()
        self._out.write(b"%d 0 obj\n" % number + head)
        if stream is not None:
            self._out.write(b"\nstream\n" + stream + b"\nendstream")
        self._out.write(b"\nendobj\n")

    def add_page(self, frame: Image.Image, dpi: float) -> None:
        """One page the size of `frame` at `dpi`, showing it (mode L or RGB)."""
        image_id, content_id, page_id = range(self._next_id, self._next_id + 3)
        self._next_id += 3
        width, height = frame.size
        color = b"/DeviceGray" if frame.mode == "L" else b"/DeviceRGB"
        data, codec = _encode(frame)
        self._object(
            image_id,
            b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace %s "
            b"/BitsPerComponent 8 /Filter %s /Length %d >>"
            % (width, height, color, codec, len(data)),
            data,
        )
        del data
        points_w, points_h = width * 72 / dpi, height * 72 / dpi
        content = b"q %.4f 0 0 %.4f 0 0 cm /Im0 Do Q" % (points_w, points_h)
        self._object(content_id, b"<< /Length %d >>" % len(content), content)
        self._object(
            page_id,
            b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 %.4f %.4f] "
            b"/Resources << /XObject << /Im0 %d 0 R >> >> /Contents %d 0 R >>"
            % (self._PAGES, points_w, points_h, image_id, content_id),
        )
        self._page_ids.append(page_id)

    def finish(self) -> int:
        """Write the page tree, catalog, cross-reference table and trailer; the page count."""
        kids = b" ".join(b"%d 0 R" % page for page in self._page_ids)
        self._object(
            self._PAGES, b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(self._page_ids))
        )
        self._object(self._CATALOG, b"<< /Type /Catalog /Pages %d 0 R >>" % self._PAGES)
        xref_at = self._out.tell()
        size = self._next_id
        self._out.write(b"xref\n0 %d\n0000000000 65535 f \n" % size)
        for number in range(1, size):
            self._out.write(b"%010d 00000 n \n" % self._offsets[number])
        self._out.write(
            b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n"
            % (size, self._CATALOG, xref_at)
        )
        return len(self._page_ids)


def _encode(frame: Image.Image) -> tuple[bytes, bytes]:
    """The frame's pixels as a PDF image stream and its filter: JPEG, as Pillow's PDF writer
    stored them before, or deflate when a side is too long for JPEG."""
    if max(frame.size) <= _JPEG_MAX_SIDE:
        buffer = io.BytesIO()
        frame.save(buffer, format="JPEG")
        return buffer.getvalue(), b"/DCTDecode"
    return zlib.compress(frame.tobytes(), 6), b"/FlateDecode"


def _frame_dpi(image: Image.Image) -> float:
    dpi = image.info.get("dpi")
    try:
        value = float(dpi[0]) if dpi else _DEFAULT_DPI
    except (TypeError, ValueError, IndexError):
        value = _DEFAULT_DPI
    return value if 70 <= value <= 1200 else _DEFAULT_DPI


def _check_size(index: int, width: int, height: int, so_far: int, caps: PixelCaps) -> int:
    """The pixels decoded once this frame is too; PageRenderFailed past either cap."""
    if width * height > caps.per_frame or so_far + width * height > caps.total:
        raise PageRenderFailed(
            "too_large", f"frame {index + 1} of the image passes the pixel limits"
        )
    return so_far + width * height


def _upright(image: Image.Image) -> Image.Image:
    """The current frame decoded, in L or RGB, turned upright as OCR read it
    (app/ingestion/loaders/image.py): at most two copies of its pixels at once."""
    mode = "L" if image.mode in _GRAY_MODES else "RGB"
    image.load()  # decodes this frame only
    frame = image if image.mode == mode else image.convert(mode)
    orientation = image.getexif().get(ExifTags.Base.Orientation, 1)
    turn = _TURNS.get(orientation)
    return frame if turn is None else frame.transpose(turn)


def image_to_pdf(source: Path, target: Path, caps: PixelCaps) -> int:
    """Write the frames of an image file as the pages of a PDF at `target`, one decoded frame
    at a time, at each frame's resolution; the number of pages written."""
    with Image.open(source) as image, target.open("wb") as out:
        writer = _PdfWriter(out)
        decoded = 0
        for index in range(getattr(image, "n_frames", 1)):
            image.seek(index)
            decoded = _check_size(index, *image.size, decoded, caps)
            frame = _upright(image)
            writer.add_page(frame, _frame_dpi(image))
            del frame  # before the next frame is decoded
        return writer.finish()
