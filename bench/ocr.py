"""OCR speed: pages per minute on this machine, and a 50-page scanned PDF through the API.

First, `--pages` full A4 pages of English and of Arabic text (11 pt, scanned at 300 dpi with
light noise, stored as JPEG in image-only PDFs) are read by the service's loader in this
process, at RAG_OCR_DPI 200 and 300: seconds per page (median, p95) and pages per minute. Then a
`--api-pages`-page English scan is uploaded through the HTTP API (TestClient, the threads job
backend, Chroma in a temp directory, the shipped embedder), and the time until its job is done
is split into the OCR stage (from the job's `ocr` progress) and the rest.

    python -m bench.ocr [--pages 6] [--api-pages 50]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from app.config import load_settings
from app.container import Container
from app.ingestion import LoadLimits, load
from app.main import create_app
from bench.common import median, percentile, table
from eval.ocr_quality import scan_pdf
from eval.scan_render import ScanStyle, render_scan

ENGLISH = (
    "The north pumping station is inspected every spring by the river authority. Operators "
    "record the pressure readings twice a day and report any fault to the control room within "
    "one hour. The spare impellers are kept in the store beside the workshop. "
) * 8
ARABIC = (
    "تقع محطة الضخ الشمالية بالقرب من النهر الكبير ويسجل المشغلون قراءات الضغط مرتين يوميا "
    "ويبلغون غرفة التحكم عن أي عطل خلال ساعة واحدة وتحفظ قطع الغيار في المخزن بجوار الورشة "
) * 7
JWT_SECRET = "bench-only-secret-0123456789-abcdefghijklmnopqrstuvwxyz"


def _multi_page_pdf(text: str, rtl: bool, pages: int, noise: float = 8.0) -> bytes:
    """An image-only PDF of `pages` scanned pages (merged from one-page PDFs)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(pages):
            style = ScanStyle(font="sans" if rtl else "serif", points=11, dpi=300, noise=noise)
            path = Path(tmp) / f"{number}.pdf"
            page = render_scan(text, style, rtl, seed=number)
            path.write_bytes(scan_pdf(page, 300, "JPEG"))
            writer.append(PdfReader(path))
        out = Path(tmp) / "all.pdf"
        with out.open("wb") as handle:
            writer.write(handle)
        return out.read_bytes()


def pages_per_minute(pages: int) -> list[list[object]]:
    """Rows: language, OCR dpi, s/page median and p95, pages/min."""
    rows: list[list[object]] = []
    limits = LoadLimits()
    with tempfile.TemporaryDirectory() as tmp:
        for language, text, rtl in (("en", ENGLISH, False), ("ar", ARABIC, True)):
            single = Path(tmp) / f"{language}.pdf"
            single.write_bytes(_multi_page_pdf(text, rtl, 1))
            for dpi in (200, 300):
                ocr_limits = replace(limits, ocr=replace(limits.ocr, dpi=dpi))
                seconds = []
                for _ in range(pages):
                    started = time.perf_counter()
                    load(single, ocr_limits)
                    seconds.append(time.perf_counter() - started)
                rows.append(
                    [
                        language,
                        dpi,
                        f"{median(seconds):.2f}",
                        f"{percentile(seconds, 95):.2f}",
                        f"{60 / statistics.fmean(seconds):.1f}",
                    ]
                )
                print(rows[-1], flush=True)
    return rows


def api_scan(pages: int) -> dict[str, Any]:
    """Upload a `pages`-page English scan and time its job: OCR stage and total."""
    # Clean pages: with grey noise JPEG pages are ~1 MB each, 50 of them past the upload limit.
    content = _multi_page_pdf(ENGLISH, False, pages, noise=0.0)
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(
            _env_file=None,
            data_dir=Path(data),
            llm_provider="extractive",
            env="development",
            log_level="WARNING",
            jwt_secret=JWT_SECRET,
        )
        app = create_app(settings)
        with TestClient(app) as client:
            container: Container = app.state.container
            record = container.users.create_user(
                tenant_id="bench", username="bench-user", password="a long bench password"
            )
            token = container.token_codec.issue(record.id, "bench").access_token
            headers = {"Authorization": f"Bearer {token}"}
            started = time.perf_counter()
            response = client.post(
                "/documents", files={"file": ("scan.pdf", content)}, headers=headers
            )
            assert response.status_code == 202, response.text
            job_id = response.json()["job_id"]
            ocr_started = ocr_ended = None
            while True:
                job = client.get(f"/jobs/{job_id}", headers=headers).json()
                stage = job["progress"]["stage"]
                now = time.perf_counter()
                if stage == "ocr" and ocr_started is None:
                    ocr_started = now
                if stage != "ocr" and ocr_started is not None and ocr_ended is None:
                    ocr_ended = now
                if job["status"] in ("done", "failed"):
                    break
                time.sleep(0.2)
            total = time.perf_counter() - started
            assert job["status"] == "done", job
    ocr_s = (ocr_ended or total) - (ocr_started or 0.0) if ocr_started else float("nan")
    return {
        "pages": pages,
        "pdf_mb": round(len(content) / 1e6, 1),
        "total_s": round(total, 1),
        "ocr_stage_s": round(ocr_s, 1),
        "chunks": job["chunks_indexed"],
        "pages_per_minute": round(pages / total * 60, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=6, help="pages timed per language and dpi")
    parser.add_argument("--api-pages", type=int, default=50, help="pages of the API upload")
    parser.add_argument("--skip-speed", action="store_true", help="only the API upload")
    args = parser.parse_args()
    if not args.skip_speed:
        rows = pages_per_minute(args.pages)
        print(table(["language", "OCR dpi", "s/page median", "s/page p95", "pages/min"], rows))
    if args.api_pages:
        result = api_scan(args.api_pages)
        print(
            table(
                ["scanned pages", "PDF MB", "job total s", "OCR stage s", "chunks", "pages/min"],
                [
                    [
                        result["pages"],
                        result["pdf_mb"],
                        result["total_s"],
                        result["ocr_stage_s"],
                        result["chunks"],
                        result["pages_per_minute"],
                    ]
                ],
            )
        )


if __name__ == "__main__":
    main()
