"""Files for upload tests: good documents and every kind of bad one, built in memory."""

from __future__ import annotations

import io
import secrets
import zipfile

import docx
import pptx
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


def pptx_document(*slides: str) -> bytes:
    """A PowerPoint presentation with one text box per slide."""
    presentation = pptx.Presentation()
    for text in slides:
        slide = presentation.slides.add_slide(presentation.slide_layouts[6])  # blank layout
        box = slide.shapes.add_textbox(pptx.util.Inches(1), pptx.util.Inches(1), 1, 1)
        box.text_frame.text = text
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


# Entity expansion ("billion laughs"): &lol9; is 10^9 "lol"s once expanded.
BILLION_LAUGHS = '<!DOCTYPE lolz [<!ENTITY lol "lol">' + "".join(
    f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">'
    for i in range(1, 10)
)
BILLION_LAUGHS_REF = "&lol9;"


def external_entity(path: str) -> str:
    """A DOCTYPE whose entity &xxe; is the content of a local file (XXE)."""
    return f'<!DOCTYPE d [<!ENTITY xxe SYSTEM "file://{path}">'


def external_dtd(path: str) -> str:
    """A DOCTYPE that pulls a local file in as a parameter entity (XXE through the DTD)."""
    return f'<!DOCTYPE d [<!ENTITY % ext SYSTEM "file://{path}"> %ext;'


def with_entity(document: bytes, part: str, doctype: str, text: str, reference: str) -> bytes:
    """`document` (a zip-based Office file) with `doctype` declared in `part` and `text` there
    replaced by the entity `reference`."""
    source = zipfile.ZipFile(io.BytesIO(document))
    out = io.BytesIO()
    with source, zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == part:
                xml = data.decode("utf-8")
                assert text in xml, f"{text!r} is not in {part}"
                head, declared, body = xml.partition("?>")
                if not declared:  # no XML declaration: the DOCTYPE opens the part
                    head, body = "", xml
                data = (head + declared + doctype + "]>" + body.replace(text, reference)).encode()
            target.writestr(item, data)
    return out.getvalue()


def binary_blob(size: int = 4096) -> bytes:
    """Bytes that are no text in any encoding (an executable renamed to .txt, say)."""
    header = b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8
    return header + secrets.token_bytes(size - len(header))
