"""The pages a job has OCR'd so far, kept on disk beside its upload, so that a job that gave its
worker back to other tenants (or was interrupted) resumes from them instead of reading them again.

One JSON line per page read: its key (the loader's 0-based page or frame index) and its layout,
in full (words with boxes, confidence and line numbers, or the problem that made it unreadable).
The file is ours, written by the process that runs the job; a line that cannot be read (a crash
mid-write) is skipped, so that page is simply read again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.domain import OcrLayout, OcrWord

SUFFIX = ".ocr-pages"


def checkpoint_of(upload: Path) -> Path:
    """Where the OCR'd pages of a job's stored upload are kept."""
    return upload.with_name(upload.name + SUFFIX)


def _encode(key: int, layout: OcrLayout) -> str:
    words = [[w.text, *w.box, w.confidence, *w.line] for w in layout.words]
    entry = {
        "key": key,
        "size": [layout.width, layout.height],
        "words": words,
        "confidence": layout.confidence,
        "script": layout.script,
        "problem": layout.problem,
    }
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":"))


def _decode(entry: dict[str, Any]) -> tuple[int, OcrLayout]:
    words = tuple(
        OcrWord(str(text), (int(a), int(b), int(c), int(d)), float(conf), (int(x), int(y), int(z)))
        for text, a, b, c, d, conf, x, y, z in entry["words"]
    )
    width, height = (int(side) for side in entry["size"])
    problem = entry["problem"]
    layout = OcrLayout(
        width,
        height,
        words,
        float(entry["confidence"]),
        str(entry["script"]),
        None if problem is None else str(problem),
    )
    return int(entry["key"]), layout


def read_pages(path: Path) -> dict[int, OcrLayout]:
    """The pages kept in a checkpoint file (none when it is missing)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    pages: dict[int, OcrLayout] = {}
    for line in lines:
        try:
            key, layout = _decode(json.loads(line))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a crash: that page is read again
        pages[key] = layout
    return pages


def append_page(path: Path, key: int, layout: OcrLayout) -> None:
    """Keep one page just read."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(_encode(key, layout) + "\n")
