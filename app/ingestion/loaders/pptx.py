"""PowerPoint slides (python-pptx): each slide is a page, its number the slide number."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pptx import Presentation
from pptx.shapes.group import GroupShape

from app.domain import Page
from app.errors import CorruptDocument, EmptyDocument
from app.ingestion.archive import check_office_archive
from app.ingestion.normalise import normalise_line, normalise_text
from app.ingestion.parse_limits import CharBudget, LoadLimits, check_page_count


def _shape_texts(shapes: Iterable[Any]) -> Iterator[str]:
    for shape in shapes:
        if isinstance(shape, GroupShape):
            yield from _shape_texts(shape.shapes)
        elif getattr(shape, "has_table", False):
            for row in shape.table.rows:
                yield " | ".join(normalise_line(cell.text) for cell in row.cells)
        elif getattr(shape, "has_text_frame", False) and shape.text_frame.text.strip():
            yield shape.text_frame.text


def _slide_text(slide: Any) -> str:
    parts = list(_shape_texts(slide.shapes))
    if slide.has_notes_slide:
        notes = slide.notes_slide.notes_text_frame
        if notes is not None and notes.text.strip():
            parts.append(notes.text)
    return "\n\n".join(parts)


def load_pptx(path: Path, limits: LoadLimits) -> list[Page]:
    """One Page per slide with text (shapes, tables, groups, speaker notes)."""
    check_office_archive(path, limits, "PPTX", required="ppt/presentation.xml")
    try:
        presentation = Presentation(str(path))
        slides = list(presentation.slides)
    except Exception as exc:  # python-pptx/lxml raise many types on damaged parts
        raise CorruptDocument(
            "the PPTX file is damaged and cannot be read; open it in PowerPoint or LibreOffice, "
            "save it again and upload it"
        ) from exc
    check_page_count(len(slides), limits, unit="slides")
    budget = CharBudget(limits)
    pages: list[Page] = []
    for number, slide in enumerate(slides, start=1):
        try:
            raw = _slide_text(slide)
        except Exception as exc:
            raise CorruptDocument(f"slide {number} of the PPTX file cannot be read") from exc
        text = normalise_text(budget.spend(raw))
        if text.strip():
            pages.append(Page(number=number, label=str(number), text=text))
    if not pages:
        raise EmptyDocument("the presentation has no text on any slide (images need OCR)")
    return pages
