"""Plain text and Markdown files, decoded by detection; the whole file is page 1."""

from __future__ import annotations

from pathlib import Path

from app.domain import Page
from app.errors import DocumentTooLarge, EmptyDocument
from app.ingestion.decoding import decode_text
from app.ingestion.normalise import normalise_text
from app.ingestion.parse_limits import CharBudget, LoadLimits
from app.ingestion.section_paths import markdown_headings

# UTF-32 needs 4 bytes per character: reading more than this cannot fit under the char cap.
_BYTES_PER_CHAR_MAX = 4


def read_text_file(path: Path, limits: LoadLimits) -> str:
    """Read, decode and normalise a text file, enforcing the character cap."""
    if path.stat().st_size > limits.max_chars * _BYTES_PER_CHAR_MAX:
        raise DocumentTooLarge(
            f"the file has more than {limits.max_chars:,} characters of text, the limit; "
            "split it into smaller files and upload them separately"
        )
    text = normalise_text(decode_text(path.read_bytes()))
    CharBudget(limits).spend(text)
    if not text.strip():
        raise EmptyDocument("the file contains no text")
    return text


def load_text(path: Path, limits: LoadLimits) -> list[Page]:
    """A .txt or .md file as one page (Markdown keeps its headings for the splitter, and marks
    them for section paths)."""
    text = read_text_file(path, limits)
    if path.suffix.lower() in {".md", ".markdown"}:
        return [Page(1, "1", text, language="markdown", headings=markdown_headings(text))]
    return [Page(number=1, label="1", text=text)]
