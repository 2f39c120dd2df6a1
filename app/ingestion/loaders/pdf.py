"""PDF pages with their printed labels (pypdf), refusing encrypted files; pages without a usable
text layer are OCR'd (app/ingestion/ocr_pdf.py)."""

from __future__ import annotations

import logging
from pathlib import Path

from pypdf import PdfReader
from pypdf.errors import FileNotDecryptedError, PdfReadError

from app.domain import OcrLayout, Page
from app.errors import CorruptDocument, EncryptedDocument, NeedsOCR
from app.ingestion.loaders.pdf_text import best_page_text, positioned_texts
from app.ingestion.normalise import normalise_text
from app.ingestion.ocr import layout_text, ocr_status, unavailable
from app.ingestion.ocr_pdf import ocr_pdf_pages, scanned_pages
from app.ingestion.ocr_result import require_readable, unreadable_page
from app.ingestion.page_roles import detect_page_role
from app.ingestion.parse_limits import CharBudget, LoadLimits, check_page_count
from app.ingestion.pdf_outline import (
    TextTops,
    covering_titles,
    entries_by_page,
    place_headings,
    read_outline,
)
from app.ingestion.rtl import fix_reversed_arabic
from app.ingestion.running_lines import strip_running_lines

log = logging.getLogger(__name__)


def _corrupt(what: str) -> CorruptDocument:
    return CorruptDocument(
        f"the PDF is damaged ({what}); open it in a PDF viewer, save or print it to a new PDF "
        "and upload that"
    )


def _open(path: Path) -> PdfReader:
    try:
        reader = PdfReader(path)
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise _corrupt(str(exc) or type(exc).__name__) from exc
    if reader.is_encrypted:
        try:
            # An owner password alone (empty user password) still lets anyone read the text.
            opened = reader.decrypt("")
        except (PdfReadError, NotImplementedError, ValueError) as exc:
            raise EncryptedDocument(
                "the PDF is encrypted with a method that cannot be opened; "
                "remove the password and upload it again"
            ) from exc
        if not opened:
            raise EncryptedDocument(
                "the PDF is password-protected; remove the password and upload it again"
            )
    return reader


def _labels(reader: PdfReader, count: int) -> list[str]:
    """The printed page labels; pypdf falls back to 1, 2, ... where the PDF defines none."""
    try:
        labels = list(reader.page_labels)
    except Exception:  # a broken /PageLabels tree must not lose the document
        log.warning("unreadable page labels; using page numbers")
        return [str(n) for n in range(1, count + 1)]
    if len(labels) != count:
        return [str(n) for n in range(1, count + 1)]
    return [label or str(n) for n, label in enumerate(labels, start=1)]


def load_pdf(path: Path, limits: LoadLimits) -> list[Page]:
    """One Page per PDF page that has text; page numbers are 1-based, labels as printed."""
    reader = _open(path)
    try:
        count = len(reader.pages)
    except FileNotDecryptedError as exc:
        raise EncryptedDocument("the PDF is password-protected; remove the password") from exc
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _corrupt("its page tree cannot be read") from exc
    if count == 0:
        raise _corrupt("it has no pages")
    check_page_count(count, limits)
    labels = _labels(reader, count)
    entries = read_outline(reader)
    outline = entries_by_page(entries)
    covering = covering_titles(entries, count)
    budget = CharBudget(limits)
    texts: list[str] = []
    tops: dict[int, TextTops] = {}
    reversed_pages = 0
    # Pages opening a bookmark with a height: where each line is printed turns that height into
    # a position in the page's text.
    placed = {i for i, opening in outline.items() if any(e.top is not None for e in opening)}
    # Word spaces and line heights come from glyph positions (PDFium); pypdf is the fallback.
    for index, positioned in enumerate(positioned_texts(path, count, placed)):
        try:
            raw = best_page_text(positioned.text, reader.pages[index])
            if positioned.tops is not None:
                tops[index] = positioned.tops
            elif index in placed:
                tops[index] = TextTops()
                reader.pages[index].extract_text(visitor_text=tops[index].visit)
        except FileNotDecryptedError as exc:
            raise EncryptedDocument("the PDF is password-protected; remove the password") from exc
        except Exception as exc:  # pypdf raises many types on broken content streams
            raise _corrupt(f"page {index + 1} cannot be read: {type(exc).__name__}") from exc
        text = normalise_text(budget.spend(raw))
        text, was_reversed = fix_reversed_arabic(text)
        reversed_pages += was_reversed
        texts.append(text)
    layouts = _ocr_scanned(path, texts, limits)
    for index, read in layouts.items():
        if read.problem is None:
            texts[index] = budget.spend(layout_text(read))
    pages: list[Page] = []
    # Roles are read before running headers go: "Concept index 81" on top of a page says a lot.
    for index, (text, body) in enumerate(zip(texts, strip_running_lines(texts), strict=True)):
        layout = layouts.get(index)
        if layout is not None and layout.problem is not None:
            pages.append(unreadable_page(index + 1, labels[index], layout))
        elif body.strip():
            opening = outline.get(index, [])
            role = detect_page_role(
                text,
                page_number=index + 1,
                page_count=count,
                outline_titles=[entry.title for entry in opening],
                section_titles=covering.get(index, []),
            )
            headings = place_headings(body, opening, tops.get(index))
            pages.append(
                Page(
                    number=index + 1,
                    label=labels[index],
                    text=body,
                    role=role,
                    headings=headings,
                    ocr=layout,
                )
            )
    if not pages:
        raise NeedsOCR(
            "the PDF has no extractable text; it needs OCR (it is probably scanned images). "
            "Run it through OCR and upload the result"
        )
    require_readable(pages, "PDF")
    if reversed_pages:
        log.info("restored reading order of right-to-left text on %d page(s)", reversed_pages)
    return pages


def _ocr_scanned(path: Path, texts: list[str], limits: LoadLimits) -> dict[int, OcrLayout]:
    """What OCR read on the pages without a usable text layer (0-based index -> layout).

    Without Tesseract, a PDF with some text keeps its text pages and lists the scanned ones as
    unreadable; a PDF with none is refused with the install hint.
    """
    try:
        scanned = scanned_pages(path, texts)
    except Exception as exc:  # PDFium refusing a file pypdf read: keep the text layer
        log.warning("pages not checked for OCR (%s)", type(exc).__name__)
        return {}
    if not scanned:
        return {}
    problem = ocr_status(limits.ocr.tesseract_cmd)
    if problem is not None:
        if all(not texts[index].strip() for index in range(len(texts)) if index not in scanned):
            raise unavailable("the PDF has no extractable text (it is probably scanned images)")
        return {index: OcrLayout(0, 0, problem="OCR is not available") for index in scanned}
    return ocr_pdf_pages(path, scanned, limits.ocr)
