"""Synthetic scans for the OCR evaluations: known text typeset on an A4 page with Pillow (Arabic
shaped by raqm, right-aligned), then degraded like a scanner would: a slight rotation, grey
noise and JPEG compression, at a chosen resolution."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFont

FONTS = {
    "sans": "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "serif": "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
    "condensed": "/usr/share/fonts/truetype/dejavu/DejaVuSansCondensed.ttf",
}
# DejaVu's Arabic glyphs are in its Sans faces only (fc-list :lang=ar).
ARABIC_FONTS = ("sans", "condensed")
A4_IN = (8.27, 11.69)


@dataclass(frozen=True)
class ScanStyle:
    """How a page is typeset and scanned."""

    font: str = "serif"
    points: float = 11
    dpi: int = 300
    rotation_deg: float = 0.0
    noise: float = 0.0  # standard deviation of grey noise, 0-255
    jpeg_quality: int | None = None

    def label(self) -> str:
        """A short description for result tables."""
        parts = [self.font, f"{self.points:g}pt", f"{self.dpi}dpi"]
        if self.rotation_deg:
            parts.append(f"rot{self.rotation_deg:g}")
        if self.noise:
            parts.append(f"noise{self.noise:g}")
        if self.jpeg_quality:
            parts.append(f"jpeg{self.jpeg_quality}")
        return " ".join(parts)


def wrap(text: str, font: ImageFont.FreeTypeFont, width_px: float, rtl: bool) -> list[str]:
    """Greedy line breaking of `text` to lines at most `width_px` wide."""
    direction = "rtl" if rtl else "ltr"
    lines: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}" if current else word
        if current and font.getlength(candidate, direction=direction) > width_px:
            lines.append(current)
            current = word
        else:
            current = candidate
    if current:
        lines.append(current)
    return lines


def render_scan(text: str, style: ScanStyle, rtl: bool, seed: int = 0) -> Image.Image:
    """One A4 page of `text` (as much as fits), typeset and degraded per `style`."""
    width, height = (round(side * style.dpi) for side in A4_IN)
    page = Image.new("L", (width, height), 255)
    pen = ImageDraw.Draw(page)
    font = ImageFont.truetype(FONTS[style.font], round(style.points * style.dpi / 72))
    margin = style.dpi
    step = round(style.points * style.dpi / 72 * 1.5)
    y = margin
    for line in wrap(text, font, width - 2 * margin, rtl):
        if y + step > height - margin:
            break
        if rtl:
            pen.text((width - margin, y), line, font=font, fill=0, anchor="ra", direction="rtl")
        else:
            pen.text((margin, y), line, font=font, fill=0)
        y += step
    if style.rotation_deg:
        page = page.rotate(style.rotation_deg, resample=Image.Resampling.BICUBIC, fillcolor=255)
    if style.noise:
        pixels = np.asarray(page, dtype=np.float32)
        pixels += np.random.default_rng(seed).normal(0.0, style.noise, pixels.shape)
        page = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), mode="L")
    if style.jpeg_quality:
        buffer = io.BytesIO()
        page.save(buffer, format="JPEG", quality=style.jpeg_quality)
        page = Image.open(io.BytesIO(buffer.getvalue())).convert("L")
    return page


def printed_text(text: str, style: ScanStyle, rtl: bool) -> str:
    """The part of `text` that `render_scan` fits on the page, one space between words."""
    width, height = (round(side * style.dpi) for side in A4_IN)
    font = ImageFont.truetype(FONTS[style.font], round(style.points * style.dpi / 72))
    step = round(style.points * style.dpi / 72 * 1.5)
    fits = max((height - 2 * style.dpi) // step, 0)
    return " ".join(wrap(text, font, width - 2 * style.dpi, rtl)[:fits])
