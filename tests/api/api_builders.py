"""Files for upload tests: good documents and every kind of bad one, built in memory."""

from __future__ import annotations

import io
import secrets
import zipfile

import docx
from fpdf import FPDF
from pypdf import PdfReader, PdfWriter


def text_document(*paragraphs: str) -> bytes:
    """A UTF-8 .txt body with one paragraph per blank-line-separated block."""
    return "\n\n".join(paragraphs).encode("utf-8")


def pdf_document(*pages: str) -> bytes:
    """A text PDF with one page per argument."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def encrypted_pdf(text: str = "Secret plans for the tower.") -> bytes:
    """A PDF that needs a password to open."""
    writer = PdfWriter()
    writer.append(PdfReader(io.BytesIO(pdf_document(text))))
    writer.encrypt(user_password="hunter2", owner_password="owner", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def corrupt_pdf() -> bytes:
    """Something that starts like a PDF and then is garbage."""
    return b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R" + secrets.token_bytes(2000)


def image_only_pdf() -> bytes:
    """A PDF whose page has a drawing but no text layer (a scan, as far as parsing can tell)."""
    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 100, 60, style="F")
    return bytes(pdf.output())


def docx_document(*paragraphs: str) -> bytes:
    """A Word document with these paragraphs."""
    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def docx_zip_bomb(expanded_bytes: int = 40 * 1024 * 1024) -> bytes:
    """A valid DOCX carrying a member that inflates ~1000x (tens of KB on the wire)."""
    out = io.BytesIO(docx_document("innocent looking"))
    with zipfile.ZipFile(out, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/media/padding.xml", b"\x00" * expanded_bytes)
    return out.getvalue()


def binary_blob(size: int = 4096) -> bytes:
    """Bytes that are no text in any encoding (an executable renamed to .txt, say)."""
    header = b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8
    return header + secrets.token_bytes(size - len(header))
