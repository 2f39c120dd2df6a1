"""Parsing in a child process: same results, same typed errors, and a hard time limit."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from ingestion_builders import ninety_five_char_lines, pdf_from_pages, roman_front_matter_pdf
from pypdf import PdfReader, PdfWriter

from app.errors import EncryptedDocument, ParseTimeout, UnsupportedFileType
from app.ingestion import LoadLimits, load, load_with_timeout

pytestmark = pytest.mark.unit


def test_child_process_returns_the_same_pages(tmp_path: Path, limits: LoadLimits) -> None:
    path = roman_front_matter_pdf(tmp_path / "book.pdf")
    assert load_with_timeout(path, limits, timeout_s=60) == load(path, limits)


def test_typed_errors_cross_the_process_boundary(tmp_path: Path, limits: LoadLimits) -> None:
    source = pdf_from_pages(tmp_path / "plain.pdf", [["secret"]])
    writer = PdfWriter(clone_from=PdfReader(source))
    writer.encrypt(user_password="pw", algorithm="AES-256")
    locked = tmp_path / "locked.pdf"
    writer.write(locked)
    with pytest.raises(EncryptedDocument, match="password-protected") as caught:
        load_with_timeout(locked, limits, timeout_s=60)
    assert caught.value.code == "encrypted_document"
    odd = tmp_path / "x.exe"
    odd.write_bytes(b"MZ")
    with pytest.raises(UnsupportedFileType):
        load_with_timeout(odd, limits, timeout_s=60)


def test_slow_parse_is_stopped_at_the_limit(tmp_path: Path) -> None:
    # 300 pages of text take far longer than 50 ms to parse: the child must be killed. A parent
    # that waited for the parse would get its pages and no error; one that left the child
    # running would still have it among its children.
    path = pdf_from_pages(
        tmp_path / "long.pdf", [ninety_five_char_lines(40, s) for s in range(300)]
    )
    with pytest.raises(ParseTimeout, match=r"longer than 0\.05 s"):
        load_with_timeout(path, LoadLimits(), timeout_s=0.05)
    assert [child for child in multiprocessing.active_children() if child.name == "rag-parse"] == []
