"""The single entry point from a file on disk to normalised pages."""

from __future__ import annotations

import logging
from pathlib import Path

from app.domain import Page
from app.errors import CorruptDocument, EmptyDocument, IngestionError, UnsupportedFileType
from app.ingestion.loaders import LOADER_NAMES, loader_for
from app.ingestion.parse_limits import LoadLimits

log = logging.getLogger(__name__)

SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(LOADER_NAMES)


def load(path: Path, limits: LoadLimits) -> list[Page]:
    """Extract the citable pages of `path`, choosing the loader by its extension.

    Raises only IngestionError subclasses, each with a message a user can act on.
    """
    extension = path.suffix.lower()
    loader = loader_for(extension)
    if loader is None:
        supported = ", ".join(sorted(SUPPORTED_EXTENSIONS))
        raise UnsupportedFileType(
            f"files of type {extension or '(no extension)'!r} are not supported; "
            f"upload one of: {supported}"
        )
    try:
        if path.stat().st_size == 0:
            raise EmptyDocument(f"the {extension} file is empty (0 bytes)")
        return loader(path, limits)
    except IngestionError:
        raise
    except Exception as exc:  # last line of defence: no library exception reaches callers
        log.warning("unexpected %s while reading a %s file", type(exc).__name__, extension)
        raise CorruptDocument(
            f"the {extension} file could not be read ({type(exc).__name__}); it may be damaged. "
            "Save it again from its editor and upload it"
        ) from exc
