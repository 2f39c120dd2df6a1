"""Running headers and footers are dropped; content lines, and short pages, are kept."""

from __future__ import annotations

import pytest

from app.ingestion.running_lines import strip_running_lines

pytestmark = pytest.mark.unit


def test_a_chapter_header_repeated_on_pages_is_dropped() -> None:
    pages = [
        f"Chapter 5: Arrays and matrices {n}\nBody line {n} about arrays.\nMore text {n}.\n{n}"
        for n in range(20, 25)
    ]
    stripped = strip_running_lines(pages)
    for n, text in zip(range(20, 25), stripped, strict=True):
        assert text == f"Body line {n} about arrays.\nMore text {n}."


def test_lines_that_do_not_recur_and_short_documents_are_kept() -> None:
    pages = [f"Heading {w}\nbody\nend {w}" for w in ("alpha", "beta", "gamma", "delta")]
    assert strip_running_lines(pages) == pages
    repeated = ["Header\nbody\nFooter"] * 3  # three pages: too short a document to judge
    assert strip_running_lines(repeated) == repeated
    one_line = ["word " * 30] * 4  # nothing but the line itself: it is content
    assert strip_running_lines(one_line) == one_line
