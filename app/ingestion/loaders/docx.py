"""DOCX text (docx2txt), after checking the zip for bombs. A DOCX has no fixed pages: page 1."""

from __future__ import annotations

from pathlib import Path
from xml.etree.ElementTree import ParseError
from zipfile import BadZipFile

import docx2txt

from app.domain import Page
from app.errors import CorruptDocument, EmptyDocument
from app.ingestion.archive import check_office_archive
from app.ingestion.limits import CharBudget, LoadLimits
from app.ingestion.normalise import normalise_text


def load_docx(path: Path, limits: LoadLimits) -> list[Page]:
    """The document's text (body, headers, footers, tables) as a single page."""
    check_office_archive(path, limits, "DOCX", required="word/document.xml")
    try:
        raw = docx2txt.process(str(path)) or ""
    except (ParseError, BadZipFile, KeyError, ValueError, OSError) as exc:
        raise CorruptDocument(
            "the DOCX file is damaged (its XML cannot be read); open it in Word or LibreOffice, "
            "save it again and upload it"
        ) from exc
    text = normalise_text(CharBudget(limits).spend(raw))
    if not text.strip():
        raise EmptyDocument("the DOCX document contains no text")
    return [Page(number=1, label="1", text=text)]
