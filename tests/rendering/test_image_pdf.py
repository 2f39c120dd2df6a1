"""An uploaded image kept as a PDF of its frames, written in a limited child one frame at a time:
every frame becomes an upright page PDFium draws, at the frame's resolution, and the pixel caps
and the child's memory limit bind it (a file of many large frames fits in the memory of one)."""

from __future__ import annotations

import io
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from PIL import Image, ImageDraw

from app.rendering.image_pdf import PixelCaps
from app.rendering.isolated import image_to_pdf_isolated, render_page_isolated
from app.rendering.pdf_page import PageRenderFailed, RenderLimits
from tests.scans import blank_frames_tiff, image_bytes

pytestmark = pytest.mark.integration

CHILD = RenderLimits(timeout_s=120, max_memory_bytes=2048 * 1024 * 1024, max_cpu_s=120)
CAPS = PixelCaps(per_frame=60_000_000, total=2_000_000_000)


def _marked(size: tuple[int, int], mode: str) -> Image.Image:
    """A white picture with a black square in its top-left quarter."""
    picture = Image.new("RGB", size, "white")
    width, height = size
    ImageDraw.Draw(picture).rectangle((width // 8, height // 8, width // 4, height // 4), "black")
    return picture.convert(mode)


def _page_sizes(path: Path) -> list[tuple[float, float]]:
    document = pdfium.PdfDocument(path)
    try:
        return [tuple(round(side, 1) for side in page.get_size()) for page in document]  # type: ignore[misc]
    finally:
        document.close()


def _dark_quarter(png: bytes) -> tuple[float, float]:
    """Share of dark pixels in the top-left and bottom-right quarters of a picture."""
    gray = Image.open(io.BytesIO(png)).convert("L")
    width, height = gray.size
    shares = []
    for box in ((0, 0, width // 2, height // 2), (width // 2, height // 2, width, height)):
        quarter = gray.crop(box)
        dark = sum(count for value, count in enumerate(quarter.histogram()) if value < 100)
        shares.append(dark / (quarter.width * quarter.height))
    return shares[0], shares[1]


def test_every_frame_becomes_a_page_at_its_own_resolution(tmp_path: Path) -> None:
    frames = [_marked((1200, 1600), "1"), _marked((900, 600), "P"), _marked((800, 800), "RGBA")]
    source = tmp_path / "scan.tiff"
    out = io.BytesIO()
    frames[0].save(out, format="TIFF", save_all=True, append_images=frames[1:], dpi=(200, 200))
    source.write_bytes(out.getvalue())
    target = tmp_path / "kept.pdf"

    assert image_to_pdf_isolated(source, target, CHILD, CAPS) == 3
    # 1200 x 1600 px at 200 dpi is 432 x 576 pt.
    assert _page_sizes(target) == [(432.0, 576.0), (324.0, 216.0), (288.0, 288.0)]
    for page in (1, 2, 3):
        rendered = render_page_isolated(target, page, RenderLimits(max_side_px=400))
        top_left, bottom_right = _dark_quarter(rendered.png)
        assert top_left > 0.05 and bottom_right < 0.01, (page, top_left, bottom_right)


def test_a_sideways_phone_photo_is_kept_upright(tmp_path: Path) -> None:
    upright = _marked((600, 900), "RGB")
    exif = Image.Exif()
    exif[0x0112] = 6  # "turn 90 degrees clockwise to view"
    stored = upright.rotate(90, expand=True)  # as the camera stored it
    source = tmp_path / "photo.jpg"
    source.write_bytes(image_bytes([stored], "JPEG", quality=90, exif=exif))
    target = tmp_path / "kept.pdf"

    assert image_to_pdf_isolated(source, target, CHILD, CAPS) == 1
    ((width, height),) = _page_sizes(target)
    assert height > width  # portrait, as OCR read it
    top_left, bottom_right = _dark_quarter(render_page_isolated(target, 1, RenderLimits()).png)
    assert top_left > 0.05 and bottom_right < 0.01


def test_many_large_frames_fit_in_the_memory_of_one(tmp_path: Path) -> None:
    # Four blank 7700 x 7700 RGB frames decode to 178 MB each; the child has 500 MB of address
    # space, so it passes only holding about one frame at a time (Pillow's PDF writer, given
    # every frame in a list as the decoder once did, peaked at 1.4 GB resident on this file).
    source = tmp_path / "blanks.tiff"
    source.write_bytes(blank_frames_tiff(_marked((2480, 3508), "L"), blank_frames=4))
    target = tmp_path / "kept.pdf"
    tight = RenderLimits(timeout_s=120, max_memory_bytes=500 * 1024 * 1024, max_cpu_s=120)

    assert image_to_pdf_isolated(source, target, tight, CAPS) == 5
    assert len(_page_sizes(target)) == 5


@pytest.mark.parametrize(
    ("caps", "why"),
    [
        (PixelCaps(per_frame=1_000_000, total=10**9), "one frame"),
        (PixelCaps(10**9, 2_500_000), "all"),
    ],
)
def test_an_image_over_the_pixel_caps_is_not_converted(
    tmp_path: Path, caps: PixelCaps, why: str
) -> None:
    frames = [_marked((1200, 1000), "L"), _marked((1200, 1000), "L"), _marked((1200, 1000), "L")]
    source = tmp_path / "scan.tiff"
    source.write_bytes(image_bytes(frames, "TIFF"))
    with pytest.raises(PageRenderFailed) as failed:
        image_to_pdf_isolated(source, tmp_path / "kept.pdf", CHILD, caps)
    assert failed.value.reason == "too_large", why
