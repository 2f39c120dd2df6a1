"""Size limits for parsing untrusted documents, checked before and while extracting."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.errors import DocumentTooLarge

if TYPE_CHECKING:
    from app.config import Settings


@dataclass(frozen=True)
class OcrLimits:
    """How pages without a text layer are read: the Tesseract command, the resolution pages are
    rasterised at, and the caps (pages per document, pixels per picture and per image file
    checked before decoding, wall time per page; `pages_allowed` is what the tenant's OCR quota
    leaves, None: no quota)."""

    tesseract_cmd: str = "tesseract"
    dpi: int = 200
    max_pages: int = 200
    max_image_pixels: int = 60_000_000
    max_total_pixels: int = 2_000_000_000
    page_timeout_s: float = 60.0
    pages_allowed: int | None = None


@dataclass(frozen=True)
class LoadLimits:
    """Caps on one document: pages, extracted characters, zip expansion (DOCX/PPTX/XLSX), and
    the memory and CPU time of the child process that parses it (None: no OS limit)."""

    max_pages: int = 2000
    max_chars: int = 5_000_000
    max_archive_bytes: int = 200 * 1024 * 1024
    max_archive_ratio: float = 100.0
    max_memory_bytes: int | None = None
    max_cpu_s: int | None = None
    ocr: OcrLimits = field(default_factory=OcrLimits)

    @classmethod
    def from_settings(cls, settings: Settings) -> LoadLimits:
        """The limits configured by RAG_MAX_PAGES, RAG_MAX_CHARS, RAG_MAX_ARCHIVE_* and
        RAG_PARSE_MAX_MEMORY_MB / RAG_PARSE_MAX_CPU_S, and RAG_OCR_*."""
        return cls(
            max_pages=settings.max_pages,
            max_chars=settings.max_chars,
            max_archive_bytes=settings.max_archive_bytes,
            max_archive_ratio=settings.max_archive_ratio,
            max_memory_bytes=settings.parse_max_memory_mb * 1024 * 1024,
            max_cpu_s=settings.parse_max_cpu_s,
            ocr=OcrLimits(
                tesseract_cmd=settings.ocr_tesseract_cmd,
                dpi=settings.ocr_dpi,
                max_pages=settings.ocr_max_pages,
                max_image_pixels=settings.ocr_max_image_pixels,
                max_total_pixels=settings.ocr_max_total_pixels,
                page_timeout_s=settings.ocr_page_timeout_s,
            ),
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
