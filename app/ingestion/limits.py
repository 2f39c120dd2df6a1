"""Size limits for parsing untrusted documents, checked before and while extracting."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.errors import DocumentTooLarge

if TYPE_CHECKING:
    from app.config import Settings


@dataclass(frozen=True)
class LoadLimits:
    """Caps on one document: pages, extracted characters, and zip expansion (DOCX/PPTX/XLSX)."""

    max_pages: int = 2000
    max_chars: int = 5_000_000
    max_archive_bytes: int = 200 * 1024 * 1024
    max_archive_ratio: float = 100.0

    @classmethod
    def from_settings(cls, settings: Settings) -> LoadLimits:
        """The limits configured by RAG_MAX_PAGES, RAG_MAX_CHARS and RAG_MAX_ARCHIVE_*."""
        return cls(
            max_pages=settings.max_pages,
            max_chars=settings.max_chars,
            max_archive_bytes=settings.max_archive_bytes,
            max_archive_ratio=settings.max_archive_ratio,
        )


def check_page_count(count: int, limits: LoadLimits, unit: str = "pages") -> None:
    """Refuse a document with more pages (slides, sheets) than allowed, before extracting them."""
    if count > limits.max_pages:
        raise DocumentTooLarge(
            f"the document has {count} {unit}, more than the limit of {limits.max_pages}; "
            "split it into smaller files and upload them separately"
        )


class CharBudget:
    """Counts extracted characters and stops extraction as soon as the cap is passed."""

    def __init__(self, limits: LoadLimits) -> None:
        self.limit = limits.max_chars
        self.used = 0

    def spend(self, text: str) -> str:
        """Account for `text`; raise DocumentTooLarge once the total exceeds the cap."""
        self.used += len(text)
        if self.used > self.limit:
            raise DocumentTooLarge(
                f"the document has more than {self.limit:,} characters of text, the limit; "
                "split it into smaller files and upload them separately"
            )
        return text
