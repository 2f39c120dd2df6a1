"""A file that needs more memory than the parse child may use fails its job as
`document_too_complex`, through the real app and worker, and nothing of it is indexed."""

from __future__ import annotations

import pytest
from api_builders import text_document
from conftest import ApiFactory
from fpdf import FPDF

pytestmark = pytest.mark.integration


def _large_pdf() -> bytes:
    """An uncompressed PDF of a few MB. Reading it needs fresh memory whatever the child's heap
    already holds (a one-page PDF sometimes parsed within the free heap under a 64 MB limit)."""
    pdf = FPDF()
    pdf.set_compression(False)
    pdf.set_font("Helvetica", size=8)
    text = "The pump manual lists every part, its torque and its service interval. " * 30
    for _ in range(500):
        pdf.add_page()
        pdf.multi_cell(0, 4, text)
    return bytes(pdf.output())


def test_a_document_over_the_parse_memory_limit_fails_its_job_clearly(
    api_factory: ApiFactory,
) -> None:
    api = api_factory(parse_max_memory_mb=64)  # below what the parse child needs for a PDF
    user = api.add_user("parse-limits")
    job = api.upload_and_wait(user, "manual.pdf", _large_pdf())
    assert job["status"] == "failed"
    assert job["error"].startswith("document_too_complex:")
    assert "64 MB of memory" in job["error"]
    document = api.client.get(f"/documents/{job['document_id']}", headers=user.headers).json()
    assert document["status"] == "failed" and document["chunks"] == 0
    assert api.client.get("/stats", headers=user.headers).json()["chunks"] == 0
    assert api.uploads_left() == []
    # Plain text is parsed in the worker itself (linear, capped) and is not affected.
    assert api.upload_and_wait(user, "notes.txt", text_document("Pump notes."))["status"] == "done"
