"""One loader per document family, chosen by file extension."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.domain import Page
from app.ingestion.limits import LoadLimits
from app.ingestion.loaders.code import CODE_LANGUAGES, load_code
from app.ingestion.loaders.docx import load_docx
from app.ingestion.loaders.pdf import load_pdf
from app.ingestion.loaders.pptx import load_pptx
from app.ingestion.loaders.sheets import load_csv, load_xlsx
from app.ingestion.loaders.text import load_text

Loader = Callable[[Path, LoadLimits], list[Page]]

LOADERS: dict[str, Loader] = {
    ".pdf": load_pdf,
    ".docx": load_docx,
    ".txt": load_text,
    ".md": load_text,
    ".markdown": load_text,
    ".pptx": load_pptx,
    ".xlsx": load_xlsx,
    ".csv": load_csv,
    **{extension: load_code for extension in CODE_LANGUAGES},
}
