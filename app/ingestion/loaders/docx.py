"""DOCX text (docx2txt), after checking the zip for bombs. A DOCX has no fixed pages: page 1.

Heading paragraphs (the built-in "heading N" styles, or any style or paragraph with an outline
level) are marked in the text for section paths (app/ingestion/section_paths.py).
"""

from __future__ import annotations

import logging
import re
import zipfile
from pathlib import Path
from xml.etree import ElementTree
from xml.etree.ElementTree import ParseError
from zipfile import BadZipFile

import docx2txt

from app.domain import Page
from app.errors import CorruptDocument, EmptyDocument
from app.ingestion.archive import check_office_archive
from app.ingestion.normalise import normalise_text
from app.ingestion.parse_limits import CharBudget, LoadLimits
from app.ingestion.section_paths import MAX_LEVEL, locate_headings

log = logging.getLogger(__name__)

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
# Style names in styles.xml are the built-in English ones whatever the document's language.
_HEADING_NAME = re.compile(r"^heading (\d)$", re.IGNORECASE)


def _outline_level(properties: ElementTree.Element | None) -> int | None:
    """The 1-based level of a `w:outlineLvl` in paragraph or style properties, if any."""
    found = properties.find(f"{_W}outlineLvl") if properties is not None else None
    if found is None:
        return None
    value = found.get(f"{_W}val", "")
    level = int(value) + 1 if value.isdigit() else None
    return level if level is not None and level <= MAX_LEVEL else None


def _heading_styles(archive: zipfile.ZipFile) -> dict[str, int]:
    """Paragraph style id -> heading level, from word/styles.xml (empty when it has none)."""
    try:
        root = ElementTree.fromstring(archive.read("word/styles.xml"))
    except KeyError:
        return {}
    levels: dict[str, int] = {}
    for style in root.iter(f"{_W}style"):
        style_id = style.get(f"{_W}styleId")
        name = style.find(f"{_W}name")
        match = _HEADING_NAME.match(name.get(f"{_W}val", "") if name is not None else "")
        level = int(match.group(1)) if match else _outline_level(style.find(f"{_W}pPr"))
        if style_id and level:
            levels[style_id] = level
    return levels


def _heading_titles(path: Path) -> list[tuple[int, str]]:
    """(level, text) of the document's heading paragraphs, in order."""
    with zipfile.ZipFile(path) as archive:
        styles = _heading_styles(archive)
        root = ElementTree.fromstring(archive.read("word/document.xml"))
    titles: list[tuple[int, str]] = []
    for paragraph in root.iter(f"{_W}p"):
        properties = paragraph.find(f"{_W}pPr")
        style = properties.find(f"{_W}pStyle") if properties is not None else None
        level = _outline_level(properties) or (
            styles.get(style.get(f"{_W}val", "")) if style is not None else None
        )
        text = "".join(node.text or "" for node in paragraph.iter(f"{_W}t")).strip()
        if level and text:
            titles.append((level, text))
    return titles


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
    try:
        headings = locate_headings(text, _heading_titles(path))
    except (ParseError, BadZipFile, KeyError, ValueError, OSError):
        # The text is already read: a broken styles part costs the section paths, not the file.
        log.warning("unreadable DOCX heading styles; no section paths", exc_info=True)
        headings = ()
    return [Page(number=1, label="1", text=text, headings=headings)]
