"""Word spaces and speed of the PDF loader on the real manuals of eval/manual_questions.py.

For each installed manual, the service's loader (`load_pdf`, in this process) runs twice: as it
was before PDFium read the text ("pypdf": every page's text from pypdf's `extract_text`) and as
it is ("now": PDFium's text page, pypdf only where PDFium has no text). The indicators of
eval/glued_words.py are computed on the loaded pages (running headers stripped), next to the
same figure for `pdftotext -layout` (poppler-utils, a reference only). "worst page" is the page
with the highest unknown share among pages with 200 letters or more.

    python -m bench.pdf_text_spaces [--manual debian-reference ...]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Collection, Iterator
from contextlib import nullcontext
from pathlib import Path
from unittest.mock import patch

from app.domain import Page
from app.ingestion.loaders.pdf import load_pdf
from app.ingestion.loaders.pdf_text import PdfiumPage
from app.ingestion.parse_limits import LoadLimits
from bench.common import table
from eval.glued_words import (
    glued_share,
    letter_runs,
    reference_pages,
    reference_vocabulary,
    unknown_share,
)
from eval.manual_questions import ALL_SOURCES, missing_sources, readable_pdf

_MIN_PAGE_LETTERS = 200


def _pypdf_only(path: Path, count: int, with_tops: Collection[int] = ()) -> Iterator[PdfiumPage]:
    """The loader's fallback on every page: pypdf's text, as before."""
    return iter([PdfiumPage(None)] * count)


def _load(path: Path, pypdf_only: bool) -> tuple[list[Page], float]:
    with (
        patch("app.ingestion.loaders.pdf.positioned_texts", _pypdf_only)
        if pypdf_only
        else nullcontext()
    ):
        started = time.perf_counter()
        pages = load_pdf(path, LoadLimits())
        return pages, time.perf_counter() - started


def _worst_page(texts: list[str], vocabulary: set[str]) -> float:
    shares = [
        unknown_share(text, vocabulary)
        for text in texts
        if sum(map(len, letter_runs(text))) >= _MIN_PAGE_LETTERS
    ]
    return max(shares, default=0.0)


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.2f}%"


def measure(manual: str) -> list[object]:
    """One table row: the manual's pages, indicators before/now/pdftotext and load seconds."""
    path = readable_pdf(ALL_SOURCES[manual].path)
    before, before_s = _load(path, pypdf_only=True)
    now, now_s = _load(path, pypdf_only=False)
    reference = reference_pages(path)
    vocabulary = reference_vocabulary(path)
    text_before = "\n".join(page.text for page in before)
    text_now = "\n".join(page.text for page in now)
    row: list[object] = [
        manual,
        len(now),
        _pct(glued_share(text_before)),
        _pct(glued_share(text_now)),
    ]
    row.append("-" if reference is None else _pct(glued_share("\n".join(reference))))
    if vocabulary is None:
        row += ["-"] * 4
    else:
        row += [
            _pct(unknown_share(text_before, vocabulary)),
            _pct(unknown_share(text_now, vocabulary)),
            _pct(_worst_page([page.text for page in before], vocabulary)),
            _pct(_worst_page([page.text for page in now], vocabulary)),
        ]
    return [*row, round(before_s, 1), round(now_s, 1)]


def main() -> None:
    """Print the table for every installed manual (or the ones named)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--manual", action="append", choices=list(ALL_SOURCES))
    args = parser.parse_args()
    chosen = {name: ALL_SOURCES[name] for name in args.manual or ALL_SOURCES}
    missing = {source.name for source in missing_sources(chosen)}
    rows = []
    for manual, source in chosen.items():
        if source.name in missing:
            print(
                f"SKIPPED {manual}: {source.path} not found (apt-get install -y {source.package})"
            )
            continue
        rows.append(measure(manual))
        print(f"measured {manual}", flush=True)
    headers = [
        "manual",
        "pages",
        "glued pypdf",
        "glued now",
        "glued pdftotext",
        "unknown pypdf",
        "unknown now",
        "worst page pypdf",
        "worst page now",
        "load s pypdf",
        "load s now",
    ]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
