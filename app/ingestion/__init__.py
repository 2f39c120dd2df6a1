"""Ingestion: a file on disk -> normalised pages -> citable chunks."""

from app.ingestion.chunking import chunk_pages
from app.ingestion.dispatch import SUPPORTED_EXTENSIONS, load
from app.ingestion.parse_limits import LoadLimits
from app.ingestion.timeout import load_with_timeout

__all__ = ["SUPPORTED_EXTENSIONS", "LoadLimits", "chunk_pages", "load", "load_with_timeout"]
