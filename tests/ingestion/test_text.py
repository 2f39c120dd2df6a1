"""Plain text: decoding by detection, rejection of binary data, normalisation, dispatch."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest

from app.errors import DocumentTooLarge, IngestionError, UndecodableText, UnsupportedFileType
from app.ingestion import SUPPORTED_EXTENSIONS, LoadLimits, load

pytestmark = pytest.mark.unit


def test_supported_extensions_are_lower_case_with_dot() -> None:
    assert {".pdf", ".docx", ".txt", ".md", ".pptx", ".xlsx", ".csv", ".py", ".json"} <= set(
        SUPPORTED_EXTENSIONS
    )
    assert all(e.startswith(".") and e == e.lower() for e in SUPPORTED_EXTENSIONS)


@pytest.mark.parametrize("name", ["photo.gif", "archive.zip", "Makefile", "old.doc"])
def test_unsupported_type_is_refused_with_the_list(
    tmp_path: Path, limits: LoadLimits, name: str
) -> None:
    path = tmp_path / name
    path.write_bytes(b"something")
    with pytest.raises(UnsupportedFileType, match=r"not supported; upload one of: .*\.pdf"):
        load(path, limits)


def test_upper_case_extension_is_accepted(tmp_path: Path, limits: LoadLimits) -> None:
    path = tmp_path / "NOTES.TXT"
    path.write_text("hello", encoding="utf-8")
    assert load(path, limits)[0].text == "hello"


@pytest.mark.parametrize(
    "content",
    [
        bytes(range(256)) * 4,
        b"\x89PNG\r\n\x1a\n" + os.urandom(2000),
        b"ELF\x7f\x02\x01\x01" + bytes(100) + b"main",
    ],
    ids=["all-bytes", "png-renamed", "executable"],
)
def test_binary_txt_is_rejected_not_mojibake(
    tmp_path: Path, limits: LoadLimits, content: bytes
) -> None:
    path = tmp_path / "data.txt"
    path.write_bytes(content)
    with pytest.raises(UndecodableText, match="not readable text"):
        load(path, limits)


def test_latin1_text_is_decoded_by_detection(tmp_path: Path, limits: LoadLimits) -> None:
    text = "Le café de la gare ouvre à sept heures. Très bon accueil, déjà réputé. " * 5
    path = tmp_path / "fr.txt"
    path.write_bytes(text.encode("cp1252"))
    assert load(path, limits)[0].text == text.strip()


def test_text_is_nfc_normalised_and_cleaned(tmp_path: Path, limits: LoadLimits) -> None:
    decomposed = unicodedata.normalize("NFD", "Café résumé")
    path = tmp_path / "n.md"
    path.write_bytes(f"# {decomposed}\r\n\r\n\r\n\r\nﬁnal line\x0b with noise   \r\n".encode())
    page = load(path, limits)[0]
    assert page.text == "# Café résumé\n\nfinal line with noise"
    assert unicodedata.is_normalized("NFC", page.text)
    assert page.language == "markdown"


def test_txt_character_cap(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_text("abcdefghij" * 200, encoding="utf-8")
    with pytest.raises(DocumentTooLarge, match=r"more than 1,000 characters"):
        load(path, LoadLimits(max_chars=1000))


def test_whitespace_only_file_is_empty(tmp_path: Path, limits: LoadLimits) -> None:
    path = tmp_path / "blank.txt"
    path.write_text(" \n\n\t \n")
    with pytest.raises(IngestionError, match="no text"):
        load(path, limits)


def test_limits_come_from_settings(tmp_path: Path) -> None:
    from app.config import load_settings

    settings = load_settings(
        _env_file=None,
        data_dir=tmp_path,
        max_pages=3,
        max_chars=99,
        max_archive_bytes=1234,
        max_archive_ratio=7.5,
        parse_max_memory_mb=512,
        parse_max_cpu_s=9,
    )
    assert LoadLimits.from_settings(settings) == LoadLimits(
        max_pages=3,
        max_chars=99,
        max_archive_bytes=1234,
        max_archive_ratio=7.5,
        max_memory_bytes=512 * 1024 * 1024,
        max_cpu_s=9,
    )
