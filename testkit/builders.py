"""Files for upload tests: good documents and every kind of bad one, built in memory."""

from __future__ import annotations

import io
import secrets
import zipfile
import zlib

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


class _RawPdf:
    """A PDF written object by object, for pages fpdf2 cannot make (nested forms, huge images);
    every page has an ordinary text layer in Helvetica (/F1)."""

    def __init__(self) -> None:
        self._objects: list[bytes] = [
            b"",
            b"",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        ]
        self._pages: list[int] = []

    def add(self, body: bytes) -> int:
        self._objects.append(body)
        return len(self._objects)

    def stream(self, data: bytes, entries: bytes = b"") -> int:
        return self.add(b"<< /Length %d %s >>\nstream\n%b\nendstream" % (len(data), entries, data))

    def page(self, text: str, drawing: bytes = b"", xobjects: dict[str, int] | None = None) -> None:
        lines = [text[i : i + 90] for i in range(0, len(text), 90)]
        shown = b" ".join(b"(%b) Tj 0 -14 Td" % line.encode("latin-1") for line in lines)
        content = self.stream(b"BT /F1 11 Tf 56 760 Td %b ET\n%b" % (shown, drawing))
        names = b" ".join(b"/%b %d 0 R" % (n.encode(), ref) for n, ref in (xobjects or {}).items())
        self._pages.append(
            self.add(
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                b"/Resources << /Font << /F1 3 0 R >> /XObject << %b >> >> >>" % (content, names)
            )
        )

    def output(self) -> bytes:
        kids = b" ".join(b"%d 0 R" % ref for ref in self._pages)
        self._objects[0] = b"<< /Type /Catalog /Pages 2 0 R >>"
        self._objects[1] = b"<< /Type /Pages /Kids [%b] /Count %d >>" % (kids, len(self._pages))
        out = bytearray(b"%PDF-1.7\n")
        offsets = []
        for number, body in enumerate(self._objects, start=1):
            offsets.append(len(out))
            out += b"%d 0 obj\n%b\nendobj\n" % (number, body)
        xref = len(out)
        out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(self._objects) + 1)
        out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
        out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
            len(self._objects) + 1,
            xref,
        )
        return bytes(out)


def heavy_drawing_pdf(
    first_page: str, heavy_page: str, lines: int = 1000, repeats: int = 100
) -> bytes:
    """Two text pages; the second also holds a vector drawing that PDFium paints for a long time
    (`lines` page-long lines filled even-odd, drawn `repeats` times through a form): a file of
    ~20 KB whose text layer parses in milliseconds."""
    pdf = _RawPdf()
    path = b"".join(b"%d 0 m %d 700 l " % (i % 600, (i * 7) % 600) for i in range(lines)) + b"f*"
    inner = pdf.stream(path, b"/Type /XObject /Subtype /Form /BBox [0 0 612 792]")
    draws = b" ".join(b"q 1 0 0 1 %d 0 cm /Lines Do Q" % (i % 3) for i in range(repeats))
    outer = pdf.stream(
        draws,
        b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] "
        b"/Resources << /XObject << /Lines %d 0 R >> >>" % inner,
    )
    pdf.page(first_page)
    pdf.page(heavy_page, b"q /Drawing Do Q", {"Drawing": outer})
    return pdf.output()


def huge_image_pdf(text: str, side_px: int = 20_000) -> bytes:
    """One text page that also shows a grey image of `side_px` x `side_px` pixels (400 MB when
    decoded at the default size), stored as ~400 KB of compressed zeros."""
    pdf = _RawPdf()
    packer = zlib.compressobj(9)
    row_block = bytes(side_px * 256)
    data = b"".join(packer.compress(row_block) for _ in range(side_px // 256))
    data += packer.compress(bytes(side_px * (side_px % 256))) + packer.flush()
    image = pdf.stream(
        data,
        b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Filter /FlateDecode" % (side_px, side_px),
    )
    pdf.page(text, b"q 400 0 0 400 100 200 cm /Photo Do Q", {"Photo": image})
    return pdf.output()
