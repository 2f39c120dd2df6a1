"""Who hears about OCR progress in this process: the parse child reports pages done / total to
its parent, which records them as the job's `ocr` stage, and sends each page it reads, which the
parent keeps (app/ingestion/ocr_checkpoint.py) so a job resumes without reading it again.
Loaders keep their (path, limits) signature, so the reporters and the pages already read are
set once per child before it loads a file."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from app.domain import OcrLayout

OcrReporter = Callable[[int, int], None]
PageReporter = Callable[[int, OcrLayout], None]


def _ignore(done: int, total: int) -> None:
    return None


def _ignore_page(key: int, layout: OcrLayout) -> None:
    return None


_reporter: list[OcrReporter] = [_ignore]
_page_reporter: list[PageReporter] = [_ignore_page]
_known: list[Mapping[int, OcrLayout]] = [{}]


def set_ocr_reporter(reporter: OcrReporter | None) -> None:
    """Send this process's OCR progress to `reporter` (None: nowhere)."""
    _reporter[0] = reporter or _ignore


def set_ocr_pages(known: Mapping[int, OcrLayout], reporter: PageReporter | None) -> None:
    """Pages (by the loader's 0-based index) read in an earlier turn of the job, used instead
    of reading them again; each page read now goes to `reporter` (None: nowhere)."""
    _known[0] = known
    _page_reporter[0] = reporter or _ignore_page


def report_ocr(done: int, total: int) -> None:
    """Tell the reporter that `done` of `total` pages have been read."""
    _reporter[0](done, total)


def ocr_page(key: int, read: Callable[[], OcrLayout]) -> OcrLayout:
    """The layout of page `key`: kept from an earlier turn, else `read()` and reported."""
    known = _known[0].get(key)
    if known is not None:
        return known
    layout = read()
    _page_reporter[0](key, layout)
    return layout
