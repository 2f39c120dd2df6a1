"""Rendering PDF pages in a limited child process: pictures, highlight boxes, the size checks
made before decoding, the OS limits, and every way it can fail (never with internals shown)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from app.rendering.isolated import page_count_isolated, render_page_isolated
from app.rendering.pdf_page import PageOutOfRange, PageRenderFailed, Passage, RenderLimits
from testkit.builders import heavy_drawing_pdf, huge_image_pdf, pdf_document

pytestmark = pytest.mark.integration

TEXT = "The GANNET mast bolts are tightened to 45 newton metres with the blue torque wrench."
LIMITS = RenderLimits(max_side_px=800, max_memory_bytes=1024 * 1024 * 1024, max_cpu_s=30)


@pytest.fixture
def pdf(tmp_path: Path) -> Path:
    path = tmp_path / "two-pages.pdf"
    path.write_bytes(pdf_document("Cover page.", TEXT))
    return path


def test_a_page_is_rendered_within_the_size_limit_with_its_passage_boxed(pdf: Path) -> None:
    rendered = render_page_isolated(pdf, 2, LIMITS, Passage("tightened to 45 newton metres"))
    image = Image.open(io.BytesIO(rendered.png))
    assert image.format == "PNG" and max(image.size) == 800
    assert (rendered.width, rendered.height) == image.size
    assert rendered.highlight_boxes == 1
    missing = Passage("words printed nowhere")
    assert render_page_isolated(pdf, 2, LIMITS, missing).highlight_boxes == 0


def test_a_page_beyond_the_document_says_how_many_there_are(pdf: Path) -> None:
    assert page_count_isolated(pdf, LIMITS) == 2
    with pytest.raises(PageOutOfRange) as raised:
        render_page_isolated(pdf, 3, LIMITS)
    assert raised.value.page_count == 2


def test_an_unreadable_file_and_a_stalled_render_are_errors_not_crashes(
    pdf: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R" + bytes(range(256)) * 8)
    with pytest.raises(PageRenderFailed) as unreadable:
        render_page_isolated(broken, 1, LIMITS)
    assert unreadable.value.reason == "unreadable"
    assert str(unreadable.value) == "the PDF page could not be drawn; the file may be damaged"
    with pytest.raises(PageRenderFailed, match=r"longer than 0\.001 s") as stalled:
        render_page_isolated(pdf, 1, RenderLimits(timeout_s=0.001))
    assert stalled.value.reason == "timeout"
    assert render_page_isolated(pdf, 1, LIMITS).png  # the renderer still works afterwards


def test_a_page_whose_images_would_decode_to_hundreds_of_megabytes_is_refused_undecoded(
    tmp_path: Path,
) -> None:
    path = tmp_path / "photo.pdf"
    path.write_bytes(huge_image_pdf("The HERON yard from above.", side_px=12_000))  # 144 MP
    with pytest.raises(PageRenderFailed) as refused:
        render_page_isolated(path, 1, LIMITS)
    assert refused.value.reason == "too_large"
    assert "more than 64 megapixels" in str(refused.value)
    allowed = RenderLimits(max_side_px=800, max_image_pixels=200_000_000, timeout_s=60)
    assert render_page_isolated(path, 1, allowed).width > 0  # the cap, not the file, refused it


def test_the_render_child_runs_under_the_cpu_and_memory_limits(tmp_path: Path, pdf: Path) -> None:
    heavy = tmp_path / "heavy.pdf"
    heavy.write_bytes(heavy_drawing_pdf("Cover.", "The OSPREY wiring diagram."))
    # The wall clock would allow 60 s: the CPU limit stops the drawing after about one second.
    with pytest.raises(PageRenderFailed) as cpu:
        render_page_isolated(heavy, 2, RenderLimits(timeout_s=60, max_cpu_s=1))
    assert cpu.value.reason == "too_complex"
    assert "more memory or CPU time than allowed" in str(cpu.value)
    # An address space too small for PDFium and the picture: refused, the caller unharmed.
    with pytest.raises(PageRenderFailed) as memory:
        render_page_isolated(pdf, 1, RenderLimits(max_memory_bytes=48 * 1024 * 1024))
    assert memory.value.reason == "too_complex"
