"""The words and boxes OCR read on a document's pages, kept beside its original so a cited
passage can be highlighted on a scanned page or an image (an image is kept as a PDF of its
frames: app/rendering/image_pdf.py)."""

from __future__ import annotations

import json
from pathlib import Path

from app.domain import OcrLayout, OcrWord
from app.rendering.passage import keyed, locate

PixelBox = tuple[float, float, float, float]  # left, top, right, bottom


def dump_layouts(layouts: dict[int, OcrLayout]) -> str:
    """JSON of page number -> picture size, mean confidence and words with boxes."""
    return json.dumps(
        {
            str(number): {
                "size": [layout.width, layout.height],
                "confidence": layout.confidence,
                "script": layout.script,
                "words": [[word.text, *word.box] for word in layout.words],
            }
            for number, layout in layouts.items()
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


def read_layout(path: Path, page: int) -> OcrLayout | None:
    """The OCR layout of a 1-based page from a file `dump_layouts` wrote; None when the page
    was not OCR'd or the file is missing or unreadable."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8")).get(str(page))
        if entry is None:
            return None
        width, height = (int(side) for side in entry["size"])
        words = tuple(
            OcrWord(str(text), (int(left), int(top), int(right), int(bottom)), 0.0)
            for text, left, top, right, bottom in entry["words"]
        )
        return OcrLayout(width, height, words, float(entry["confidence"]), str(entry["script"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def passage_word_boxes(
    layout: OcrLayout, passage: str, position_hint: float = 0.0
) -> list[PixelBox]:
    """The boxes (OCR picture pixels) of the words the passage covers, one per word."""
    chars: list[str] = []
    owner: list[int] = []
    for index, word in enumerate(layout.words):
        chars.extend(word.text)
        owner.extend([index] * len(word.text))
    span = locate(keyed(chars), passage, position_hint)
    if span is None:
        return []
    first, last = owner[span[0]], owner[span[1]]
    return [tuple(float(side) for side in word.box) for word in layout.words[first : last + 1]]  # type: ignore[misc]
