"""Rendering PDF pages in a child process: pictures, highlight boxes, and every way it can fail."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from app.rendering.pdf_page import (
    PageOutOfRange,
    Passage,
    UnreadablePdf,
    render_page_isolated,
)
from tests.api.api_builders import pdf_document

pytestmark = pytest.mark.integration

TEXT = "The GANNET mast bolts are tightened to 45 newton metres with the blue torque wrench."


@pytest.fixture
def pdf(tmp_path: Path) -> Path:
    path = tmp_path / "two-pages.pdf"
    path.write_bytes(pdf_document("Cover page.", TEXT))
    return path


def test_a_page_is_rendered_within_the_size_limit_with_its_passage_boxed(pdf: Path) -> None:
    rendered = render_page_isolated(pdf, 2, 800, Passage("tightened to 45 newton metres"))
    image = Image.open(io.BytesIO(rendered.png))
    assert image.format == "PNG" and max(image.size) == 800
    assert (rendered.width, rendered.height) == image.size
    assert rendered.highlight_boxes == 1
    assert render_page_isolated(pdf, 2, 800, Passage("words printed nowhere")).highlight_boxes == 0


def test_a_page_beyond_the_document_says_how_many_there_are(pdf: Path) -> None:
    with pytest.raises(PageOutOfRange) as raised:
        render_page_isolated(pdf, 3, 800)
    assert raised.value.page_count == 2


def test_an_unreadable_file_and_a_stalled_render_are_errors_not_crashes(
    pdf: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R" + bytes(range(256)) * 8)
    with pytest.raises(UnreadablePdf):
        render_page_isolated(broken, 1, 800)
    with pytest.raises(UnreadablePdf, match="longer than"):
        render_page_isolated(pdf, 1, 800, timeout_s=0.001)
    assert render_page_isolated(pdf, 1, 800).png  # the renderer still works afterwards
