"""Read a page picture with Tesseract (English and Arabic), keeping each word's box.

Tesseract runs as a subprocess per pass (`tesseract stdin stdout tsv`), so a page that stalls it
is killed at the per-page time limit and the child's RLIMIT_AS/RLIMIT_CPU also bind it (limits
are inherited across exec). One thread per run (`OMP_THREAD_LIMIT=1`): on a shared 2-core
machine OpenMP threads only contend.

Language per page: a first pass reads with `eng+ara`, which reads Latin text as well as `eng`
alone. When most letters it found are Arabic, the page is read again with `ara+eng` (Arabic
first) and that reading is kept: with English first, Tesseract turns some Arabic words into
Latin garbage ("يوميا" -> "logs"), while `ara` alone turns Latin codes into digits ("ZEBRA-4417"
-> "25886-4417"); Arabic first keeps both (examples in docs/evaluation.md, OCR section).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from PIL import Image

from app.domain import OcrLayout, OcrWord
from app.errors import NeedsOCR
from app.ingestion.normalise import normalise_text
from app.ingestion.parse_limits import OcrLimits
from app.text.arabic import BIDI_CONTROLS

INSTALL_HINT = "install tesseract-ocr, tesseract-ocr-eng and tesseract-ocr-ara"
LANGUAGES = ("eng", "ara")
_ARABIC = re.compile("[\u0600-\u06ff\u0750-\u077f]")
_LATIN = re.compile("[A-Za-z\u00c0-\u024f]")
# Direction marks Tesseract puts around left-to-right runs inside Arabic lines; the text is in
# logical order already, and no query contains them.
_BIDI_MARKS = re.compile(f"[\u200e\u200f{BIDI_CONTROLS}]")
# Share of Arabic letters from which a page is read again with the Arabic model first.
_ARABIC_PAGE_SHARE = 0.5
_MIXED_LOW, _MIXED_HIGH = 0.1, 0.9


def unavailable(what: str) -> NeedsOCR:
    """The error for a document that needs OCR on a server without a working Tesseract (a
    class of app.errors, so the parse child can send it to its parent by name)."""
    return NeedsOCR(
        f"{what}; it needs OCR, and OCR is not available on this server ({INSTALL_HINT})"
    )


def ocr_status(tesseract_cmd: str) -> str | None:
    """None when Tesseract runs with both language models, else why OCR is unavailable."""
    program = shutil.which(tesseract_cmd)
    if program is None:
        return f"tesseract not found ({tesseract_cmd!r}); {INSTALL_HINT}"
    try:
        listed = subprocess.run(
            [program, "--list-langs"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"tesseract does not run ({type(exc).__name__}); {INSTALL_HINT}"
    installed = set(listed.stdout.split())
    missing = [language for language in LANGUAGES if language not in installed]
    if missing:
        return f"tesseract language model(s) missing: {', '.join(missing)}; {INSTALL_HINT}"
    return None


@dataclass(frozen=True)
class _Pass:
    words: tuple[OcrWord, ...]
    confidence: float


def _mean_confidence(words: tuple[OcrWord, ...]) -> float:
    """Confidence weighted by word length, so a long misread word counts more than a stray dot."""
    weight = sum(len(word.text) for word in words)
    if not weight:
        return 0.0
    return sum(word.confidence * len(word.text) for word in words) / weight


def _parse_tsv(tsv: str) -> tuple[OcrWord, ...]:
    words: list[OcrWord] = []
    for row in tsv.splitlines()[1:]:
        cells = row.split("\t")
        if len(cells) < 12 or cells[0] != "5":
            continue
        text = _BIDI_MARKS.sub("", cells[11]).strip()
        if not text:
            continue
        block, paragraph, line = int(cells[2]), int(cells[3]), int(cells[4])
        left, top, width, height = (int(cells[i]) for i in range(6, 10))
        words.append(
            OcrWord(
                text=text,
                box=(left, top, left + width, top + height),
                confidence=max(float(cells[10]), 0.0),
                line=(block, paragraph, line),
            )
        )
    return tuple(words)


def _run(picture: bytes, languages: str, dpi: int, limits: OcrLimits) -> _Pass:
    program = shutil.which(limits.tesseract_cmd)
    if program is None:
        raise unavailable("this page has no text layer")
    command = [program, "stdin", "stdout", "-l", languages, "--dpi", str(dpi), "--psm", "3"]
    environment = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    done = subprocess.run(
        [*command, "tsv"],
        input=picture,
        capture_output=True,
        timeout=limits.page_timeout_s,
        env=environment,
        check=False,
    )
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        if b"Failed loading language" in done.stderr:
            raise unavailable("this page has no text layer")
        raise OSError(f"tesseract exited with {done.returncode}: {' '.join(detail)}")
    words = _parse_tsv(done.stdout.decode("utf-8", "replace"))
    return _Pass(words, _mean_confidence(words))


def _arabic_share(words: tuple[OcrWord, ...]) -> float:
    arabic = latin = 0
    for word in words:
        arabic += len(_ARABIC.findall(word.text))
        latin += len(_LATIN.findall(word.text))
    return arabic / (arabic + latin) if arabic + latin else 0.0


def _script(share: float) -> str:
    if share >= _MIXED_HIGH:
        return "arabic"
    return "latin" if share <= _MIXED_LOW else "mixed"


def ocr_picture(image: Image.Image, dpi: int, limits: OcrLimits) -> OcrLayout:
    """Read one page picture; a page Tesseract cannot read comes back with `problem` set.

    Raises NeedsOCR when Tesseract or a language model is missing.
    """
    gray = image.convert("L")
    buffer = io.BytesIO()
    gray.save(buffer, format="PPM")  # uncompressed: nothing to spend on PNG deflate
    picture = buffer.getvalue()
    width, height = gray.size
    try:
        best = _run(picture, "eng+ara", dpi, limits)
        share = _arabic_share(best.words)
        if share >= _ARABIC_PAGE_SHARE:
            best = _run(picture, "ara+eng", dpi, limits)
            share = _arabic_share(best.words)
    except subprocess.TimeoutExpired:
        return OcrLayout(width, height, problem=f"OCR took longer than {limits.page_timeout_s:g} s")
    except OSError as exc:
        return OcrLayout(width, height, problem=str(exc))
    if not best.words:
        return OcrLayout(width, height, problem="no text was found on it")
    return OcrLayout(width, height, best.words, round(best.confidence, 1), _script(share))


def layout_text(layout: OcrLayout) -> str:
    """The page text of an OCR layout: words joined by spaces, lines by line breaks, and a
    blank line between paragraphs; normalised like a text layer."""
    parts: list[str] = []
    previous: tuple[int, int, int] | None = None
    for word in layout.words:
        if previous is not None:
            if word.line[:2] != previous[:2]:
                parts.append("\n\n")
            elif word.line != previous:
                parts.append("\n")
            else:
                parts.append(" ")
        parts.append(word.text)
        previous = word.line
    return normalise_text("".join(parts))
