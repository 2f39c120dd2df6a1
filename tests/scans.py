"""Scanned pages for OCR tests: known text drawn by Pillow (Arabic shaped by raqm) on an A4
picture, saved as an image or wrapped in an image-only PDF, optionally beside text pages."""

from __future__ import annotations

import io
from collections.abc import Sequence

from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

SANS = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
SERIF = "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"
A4_IN = (8.27, 11.69)


def scanned_page(
    lines: Sequence[str],
    *,
    dpi: int = 300,
    points: float = 14,
    font: str = SERIF,
    rtl: bool = False,
) -> Image.Image:
    """A white A4 page at `dpi` with `lines` printed in black, one per line, from the top."""
    width, height = (round(side * dpi) for side in A4_IN)
    page = Image.new("L", (width, height), 255)
    pen = ImageDraw.Draw(page)
    typeface = ImageFont.truetype(font, round(points * dpi / 72))
    step = round(points * dpi / 72 * 1.7)
    y = dpi  # one-inch margins
    for line in lines:
        if rtl:
            pen.text((width - dpi, y), line, font=typeface, fill=0, anchor="ra", direction="rtl")
        else:
            pen.text((dpi, y), line, font=typeface, fill=0)
        y += step
    return page


def image_bytes(pages: Sequence[Image.Image], fmt: str, **options: object) -> bytes:
    """The pages saved as one image file (TIFF keeps every page as a frame)."""
    out = io.BytesIO()
    first, rest = pages[0], list(pages[1:])
    if rest:
        first.save(out, format=fmt, save_all=True, append_images=rest, **options)
    else:
        first.save(out, format=fmt, **options)
    return out.getvalue()


def scanned_pdf(pages: Sequence[Image.Image | str], dpi: int = 300) -> bytes:
    """A PDF with one page per item: a picture fills an image-only page (a scan, stored
    losslessly as PNG), a string is a page with a text layer."""
    pdf = FPDF(unit="in", format=(A4_IN[0], A4_IN[1]))
    pdf.set_margin(1)
    for item in pages:
        pdf.add_page()
        if isinstance(item, str):
            pdf.set_font("Helvetica", size=12)
            pdf.multi_cell(0, 0.25, item)
        else:
            png = io.BytesIO()
            item.save(png, format="PNG", dpi=(dpi, dpi))
            png.seek(0)
            pdf.image(png, x=0, y=0, w=A4_IN[0], h=A4_IN[1])
    return bytes(pdf.output())


def blank_frames_tiff(first: Image.Image, blank_frames: int, side: int = 7700) -> bytes:
    """A TIFF of `first` then `blank_frames` white RGB frames of side x side, deflated: a few
    MB on disk that decode to gigabytes (the shape of the file a robustness audit sent)."""
    blank = Image.new("RGB", (side, side), (255, 255, 255))
    frames = [first.convert("RGB"), *[blank] * blank_frames]  # one blank frame, held once
    return image_bytes(frames, "TIFF", compression="tiff_adobe_deflate")
