"""One loader per document family, chosen by file extension and imported on first use.

Parsing libraries (pypdf, openpyxl, python-pptx) take about a second to import together, so
importing the package stays cheap and only the loaders a process actually uses are loaded.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from app.domain import Page
from app.ingestion.loaders.languages import CODE_LANGUAGES
from app.ingestion.parse_limits import LoadLimits

# Images are read by OCR (loaders/image.py lists the formats each may hold).
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp")

Loader = Callable[[Path, LoadLimits], list[Page]]

# extension -> (module under app.ingestion.loaders, function)
LOADER_NAMES: dict[str, tuple[str, str]] = {
    ".pdf": ("pdf", "load_pdf"),
    ".docx": ("docx", "load_docx"),
    ".txt": ("text", "load_text"),
    ".md": ("text", "load_text"),
    ".markdown": ("text", "load_text"),
    ".pptx": ("pptx", "load_pptx"),
    ".xlsx": ("sheets", "load_xlsx"),
    ".csv": ("sheets", "load_csv"),
    **{extension: ("image", "load_image") for extension in IMAGE_EXTENSIONS},
    **{extension: ("code", "load_code") for extension in CODE_LANGUAGES},
}
LOADER_MODULES: tuple[str, ...] = tuple(
    sorted({f"{__name__}.{module}" for module, _ in LOADER_NAMES.values()})
)


def loader_for(extension: str) -> Loader | None:
    """The loader for a lower-case extension with its dot, or None when unsupported."""
    entry = LOADER_NAMES.get(extension)
    if entry is None:
        return None
    module = importlib.import_module(f"{__name__}.{entry[0]}")
    loader: Loader = getattr(module, entry[1])
    return loader
