"""Who hears about OCR progress in this process: the parse child reports pages done / total to
its parent, which records them as the job's `ocr` stage. Loaders keep their (path, limits)
signature, so the reporter is set once per child before it loads a file."""

from __future__ import annotations

from collections.abc import Callable

OcrReporter = Callable[[int, int], None]


def _ignore(done: int, total: int) -> None:
    return None


_reporter: list[OcrReporter] = [_ignore]


def set_ocr_reporter(reporter: OcrReporter | None) -> None:
    """Send this process's OCR progress to `reporter` (None: nowhere)."""
    _reporter[0] = reporter or _ignore


def report_ocr(done: int, total: int) -> None:
    """Tell the reporter that `done` of `total` pages have been read."""
    _reporter[0](done, total)
