"""The settings of how uploads are parsed and chunked: sizes, parse and OCR limits, section paths.

Mixed with the other concerns into the one `app.config.Settings`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from app.config.fields import setting

# Which retrieval arms index a chunk with its section path (app/ingestion/section_paths.py).
SectionPathArms = Literal["both", "keyword", "dense", "off"]


class IngestionSettings(BaseModel):
    """How uploads are parsed and chunked: sizes, parse and OCR limits, section paths."""

    chunk_size: int = setting(
        1000, group="ingestion", unit="characters", description="Characters per chunk.", gt=0
    )
    chunk_overlap: int = setting(
        150,
        group="ingestion",
        unit="characters",
        description="Characters neighbouring chunks share (must be < RAG_CHUNK_SIZE).",
        ge=0,
    )
    section_paths: SectionPathArms = setting(
        "off",
        group="ingestion",
        description="Index each chunk with the path of headings above it (chapter › section › "
        "subsection, from the PDF outline, DOCX heading styles or Markdown headings) in both arms, "
        "the keyword arm, the dense arm, or off. Off by default: no choice won on every manual's "
        "test part (docs/evaluation.md). Whatever the value, every chunk records its path, shown "
        "as the `section` breadcrumb of /search hits (never in the passage text). Changing it "
        "applies to documents ingested afterwards: re-ingest older ones.",
    )
    section_chunks: bool = setting(
        False,
        group="ingestion",
        description="Start a new chunk at every section start (PDF bookmark, DOCX heading, "
        "Markdown heading), so no chunk straddles two sections. Off by default: on the manuals "
        "it lost on gnuplot's test part (default MRR@10 0.475 -> 0.376) while it gained on "
        "R-exts' (0.600 -> 0.660; eval/README.md). Applies to documents ingested afterwards.",
    )
    max_upload_bytes: int = setting(
        50 * 1024 * 1024,
        group="ingestion",
        unit="bytes",
        description="Upload limit (413 above it, enforced while the body is read).",
        gt=0,
    )
    max_pages: int = setting(
        2000, group="ingestion", unit="pages", description="Page cap per document.", gt=0
    )
    max_chars: int = setting(
        5_000_000,
        group="ingestion",
        unit="characters",
        description="Extracted-character cap per document.",
        gt=0,
    )
    max_archive_bytes: int = setting(
        200 * 1024 * 1024,
        group="ingestion",
        unit="bytes",
        description="DOCX/PPTX/XLSX: total uncompressed bytes above which a file is a zip bomb.",
        gt=0,
    )
    max_archive_ratio: float = setting(
        100.0,
        group="ingestion",
        description="DOCX/PPTX/XLSX: compression ratio above which a file is a zip bomb.",
        gt=1,
    )
    parse_timeout_s: float = setting(
        120.0,
        group="ingestion",
        unit="s",
        description="Time limit for parsing one untrusted file (runs in a child process).",
        gt=0,
    )
    parse_max_memory_mb: int = setting(
        2048,
        group="ingestion",
        unit="MB",
        description="Memory (address space, RLIMIT_AS) of the parse child; a file that needs more "
        "fails its job with `document_too_complex`.",
        ge=64,
    )
    parse_max_cpu_s: int = setting(
        120,
        group="ingestion",
        unit="s",
        description="CPU seconds of the parse child; a file that needs more fails its job with "
        "`document_too_complex`.",
        gt=0,
    )
    ocr_tesseract_cmd: str = setting(
        "tesseract",
        group="ingestion",
        description="The Tesseract program scanned pages and images are read with (a name on PATH "
        "or a path); without it /ready shows `features.ocr: unavailable` and scans are refused "
        'with "install tesseract-ocr".',
    )
    ocr_dpi: int = setting(
        200,
        group="ingestion",
        unit="dpi",
        description="Resolution scanned PDF pages are OCR'd at (measured: 200 reads as well as "
        "300, in English and Arabic, from 8 pt text up, and takes a third less time).",
        ge=72,
        le=600,
    )
    ocr_max_pages: int = setting(
        200,
        group="ingestion",
        unit="pages",
        description="Pages (or image frames) OCR'd per document at most, checked before decoding.",
        gt=0,
    )
    ocr_max_image_pixels: int = setting(
        60_000_000,
        group="ingestion",
        unit="pixels",
        description="Pixels of one image or page picture to OCR, read from the header before "
        "decoding (an image bomb is refused).",
        gt=0,
    )
    ocr_max_total_pixels: int = setting(
        2_000_000_000,
        group="ingestion",
        unit="pixels",
        description="Pixels of all the frames of one image upload together, read from the header "
        "before decoding (the default lets RAG_OCR_MAX_PAGES A4 pages scanned at 300 dpi "
        "through); an image over it fails its job with `document_too_large`.",
        gt=0,
    )
    ocr_page_timeout_s: float = setting(
        60.0,
        group="ingestion",
        unit="s",
        description="Wall time per OCR'd page; a page over it is listed in the job's `warnings` "
        "and the others are kept.",
        gt=0,
    )
    ocr_pages_per_turn: int = setting(
        10,
        group="ingestion",
        unit="pages",
        description="A scan OCRs this many pages per turn: after each turn, if another tenant's "
        "job is waiting, the job goes back to the queue behind it and later resumes from the "
        "pages already read (kept beside the upload), so a long scan does not hold a worker "
        "while other tenants' small uploads wait. 0 = never yield.",
        ge=0,
    )

    def section_paths_in(self, arm: Literal["keyword", "dense"]) -> bool:
        """Whether this retrieval arm indexes chunks with their section path."""
        return self.section_paths in ("both", arm)
