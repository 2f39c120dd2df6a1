"""Pages OCR could not read: kept in the loader's result so the job can list them by number,
never indexed, and the reason a document fails when no page at all could be read."""

from __future__ import annotations

from collections.abc import Sequence

from app.domain import OcrLayout, Page
from app.errors import UnreadableScan


def unreadable_page(number: int, label: str, layout: OcrLayout) -> Page:
    """A page OCR could not read: no text, `layout.problem` says why."""
    return Page(number=number, label=label, text="", ocr=layout)


def is_unreadable(page: Page) -> bool:
    """Whether the page is a placeholder for a page OCR could not read."""
    return page.ocr is not None and page.ocr.problem is not None


def ocr_warnings(pages: Sequence[Page]) -> list[str]:
    """One line per unreadable page, naming it by number (and printed label if different)."""
    warnings = []
    for page in pages:
        if page.ocr is not None and page.ocr.problem is not None:
            label = "" if page.label == str(page.number) else f" ({page.label})"
            warnings.append(f"page {page.number}{label} could not be read: {page.ocr.problem}")
    return warnings


def _page_list(numbers: list[int]) -> str:
    shown = ", ".join(str(number) for number in numbers[:20])
    return shown + (f" and {len(numbers) - 20} more" if len(numbers) > 20 else "")


def require_readable(pages: Sequence[Page], kind: str) -> None:
    """UnreadableScan, naming the pages, when no page of the document has text."""
    if any(not is_unreadable(page) for page in pages):
        return
    numbers = [page.number for page in pages]
    reasons = sorted({page.ocr.problem for page in pages if page.ocr and page.ocr.problem})
    noun = "page" if len(numbers) == 1 else "pages"
    raise UnreadableScan(
        f"no text could be read from the {kind}: OCR failed on {noun} {_page_list(numbers)} "
        f"({'; '.join(reasons)}). Scan it again at a higher resolution or with more contrast"
    )
