"""A PDF large enough that parsing it needs fresh memory, for the parse memory-limit tests.

A one- or three-page PDF sometimes parsed within the free heap the parse child inherits, so a
test of RLIMIT_AS passed or failed by luck; reading 1.5 MB uncompressed always allocates.
"""

from __future__ import annotations

from fpdf import FPDF


def large_uncompressed_pdf(pages: int = 500) -> bytes:
    """An uncompressed text PDF of about 3 KB per page."""
    pdf = FPDF()
    pdf.set_compression(False)
    pdf.set_font("Helvetica", size=8)
    text = "The pump manual lists every part, its torque and its service interval. " * 30
    for _ in range(pages):
        pdf.add_page()
        pdf.multi_cell(0, 4, text)
    return bytes(pdf.output())
