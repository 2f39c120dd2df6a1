"""Hostile input: whatever the bytes, load() answers with pages or a typed error, never a crash."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ingestion_builders import pdf_from_pages

from app.errors import IngestionError
from app.ingestion import LoadLimits, load

pytestmark = pytest.mark.unit

EXTENSIONS = [".pdf", ".docx", ".pptx", ".xlsx", ".txt", ".csv", ".json", ".py", ".md"]


def load_or_typed_error(path: Path) -> None:
    try:
        pages = load(path, LoadLimits())
    except IngestionError as exc:
        assert exc.message and exc.code != "error"
    else:
        assert pages and all(p.number >= 1 and p.text.strip() for p in pages)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=3000), extension=st.sampled_from(EXTENSIONS))
def test_random_bytes_never_escape_as_library_errors(data: bytes, extension: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"upload{extension}"
        path.write_bytes(data)
        load_or_typed_error(path)


def test_damaged_pdfs_never_escape_as_library_errors(tmp_path: Path) -> None:
    good = pdf_from_pages(tmp_path / "good.pdf", [["Some text on a page."]] * 3).read_bytes()
    rng = random.Random(7)
    for attempt in range(60):
        damaged = bytearray(good)
        for _ in range(rng.randint(1, 20)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        path = tmp_path / f"damaged{attempt}.pdf"
        path.write_bytes(bytes(damaged))
        load_or_typed_error(path)


def test_missing_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(IngestionError):
        load(tmp_path / "gone.pdf", LoadLimits())
