"""Character and word error rates of OCR on synthetic scans, English and Arabic.

XQuAD paragraphs (English and their Arabic translations, articles outside the dev split) are
typeset on A4 pages in DejaVu fonts at several sizes, some rotated slightly, some with grey
noise, some JPEG-compressed, scanned at 150 and 300 dpi, wrapped in image-only PDFs and read by
the service's own loader (PDFium rasterising at RAG_OCR_DPI, then Tesseract) at 200 and 300 dpi.

    python -m eval.ocr_quality [--paragraphs 6] [--write]

Writes eval/results/ocr-quality.json with --write.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from fpdf import FPDF
from PIL import Image

from app.ingestion import LoadLimits, load
from eval.datasets import load_task, xquad_dev_articles
from eval.scan_render import A4_IN, ARABIC_FONTS, ScanStyle, printed_text, render_scan

RESULTS = Path(__file__).resolve().parent / "results" / "ocr-quality.json"
# Each paragraph is scanned in one of these ways (cycled), at every scan resolution.
DEGRADATIONS: tuple[dict[str, Any], ...] = (
    {"points": 11},
    {"points": 10, "rotation_deg": 0.8},
    {"points": 12, "noise": 25.0},
    {"points": 11, "rotation_deg": -0.5, "jpeg_quality": 50},
)
LATIN_FONTS = ("serif", "sans", "condensed")


def edit_distance(reference: list[str], hypothesis: list[str]) -> int:
    """Levenshtein distance between two sequences (characters or words)."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref in enumerate(reference, start=1):
        current = [i]
        for j, hyp in enumerate(hypothesis, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref != hyp)))
        previous = current
    return previous[-1]


def error_rates(reference: str, hypothesis: str) -> tuple[float, float]:
    """(CER, WER) of `hypothesis` against `reference`, whitespace collapsed."""
    ref, hyp = " ".join(reference.split()), " ".join(hypothesis.split())
    cer = edit_distance(list(ref), list(hyp)) / max(len(ref), 1)
    wer = edit_distance(ref.split(), hyp.split()) / max(len(ref.split()), 1)
    return cer, wer


def scan_pdf(page: Image.Image, dpi: int, fmt: str = "PNG") -> bytes:
    """An image-only PDF of one scanned page: PNG inside by default, so the PDF adds no
    artefacts; JPEG (quality 75) as scanners store pages, ten times smaller."""
    pdf = FPDF(unit="in", format=A4_IN)
    pdf.add_page()
    encoded = io.BytesIO()
    if fmt == "JPEG":
        page.save(encoded, format="JPEG", quality=75, dpi=(dpi, dpi))
    else:
        page.save(encoded, format="PNG", dpi=(dpi, dpi))
    encoded.seek(0)
    pdf.image(encoded, x=0, y=0, w=A4_IN[0], h=A4_IN[1])
    return bytes(pdf.output())


def paragraphs(language: str, count: int) -> list[str]:
    """The first paragraph of the first `count` XQuAD articles outside the dev split."""
    task = load_task(f"xquad-{language}-{language}")
    dev = xquad_dev_articles()
    chosen: dict[int, str] = {}
    for pid, text in task.paragraphs.items():
        article = int(pid.split(":")[1])
        if article not in dev and article not in chosen:
            chosen[article] = text
    return list(chosen.values())[:count]


def styles(language: str, index: int, scan_dpi: int) -> ScanStyle:
    """The scan style of the `index`-th paragraph: degradation and font cycled."""
    fonts = ARABIC_FONTS if language == "ar" else LATIN_FONTS
    degradation = DEGRADATIONS[index % len(DEGRADATIONS)]
    return ScanStyle(font=fonts[index % len(fonts)], dpi=scan_dpi, **degradation)


def measure(
    count: int, scan_dpis: tuple[int, ...], raster_dpis: tuple[int, ...]
) -> list[dict[str, Any]]:
    """One row per (language, paragraph, scan dpi, raster dpi)."""
    rows: list[dict[str, Any]] = []
    limits = LoadLimits()
    with tempfile.TemporaryDirectory() as tmp:
        for language in ("en", "ar"):
            rtl = language == "ar"
            for index, text in enumerate(paragraphs(language, count)):
                for scan_dpi in scan_dpis:
                    style = styles(language, index, scan_dpi)
                    reference = printed_text(text, style, rtl)
                    path = Path(tmp) / f"{language}-{index}-{scan_dpi}.pdf"
                    path.write_bytes(scan_pdf(render_scan(text, style, rtl, seed=index), scan_dpi))
                    for raster_dpi in raster_dpis:
                        ocr_limits = replace(limits, ocr=replace(limits.ocr, dpi=raster_dpi))
                        started = time.perf_counter()
                        pages = load(path, ocr_limits)
                        seconds = time.perf_counter() - started
                        hypothesis = "\n".join(page.text for page in pages)
                        cer, wer = error_rates(reference, hypothesis)
                        rows.append(
                            {
                                "language": language,
                                "paragraph": index,
                                "style": style.label(),
                                "scan_dpi": scan_dpi,
                                "raster_dpi": raster_dpi,
                                "cer": round(cer, 4),
                                "wer": round(wer, 4),
                                "seconds": round(seconds, 2),
                                "confidence": pages[0].ocr.confidence if pages[0].ocr else None,
                            }
                        )
                        print(
                            f"{language} {style.label():36} raster {raster_dpi}: "
                            f"CER {cer:.3f} WER {wer:.3f} {seconds:.1f} s",
                            flush=True,
                        )
    return rows


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean CER, WER and seconds per page by language, scan dpi and raster dpi."""
    groups: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["language"], row["scan_dpi"], row["raster_dpi"]), []).append(row)
    return [
        {
            "language": language,
            "scan_dpi": scan_dpi,
            "raster_dpi": raster_dpi,
            "pages": len(group),
            "cer": round(statistics.fmean(r["cer"] for r in group), 4),
            "wer": round(statistics.fmean(r["wer"] for r in group), 4),
            "median_cer": round(statistics.median(r["cer"] for r in group), 4),
            "seconds_per_page": round(statistics.fmean(r["seconds"] for r in group), 2),
        }
        for (language, scan_dpi, raster_dpi), group in sorted(groups.items())
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paragraphs", type=int, default=6, help="per language")
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.name}")
    args = parser.parse_args()
    rows = measure(args.paragraphs, (150, 300), (200, 300))
    table = summary(rows)
    print("\n| language | scan dpi | OCR dpi | pages | CER | WER | median CER | s/page |")
    print("|---|---|---|---|---|---|---|---|")
    for t in table:
        print(
            f"| {t['language']} | {t['scan_dpi']} | {t['raster_dpi']} | {t['pages']} | "
            f"{t['cer']:.3f} | {t['wer']:.3f} | {t['median_cer']:.3f} | {t['seconds_per_page']} |"
        )
    if args.write:
        RESULTS.write_text(
            json.dumps({"summary": table, "pages": rows}, indent=1, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
