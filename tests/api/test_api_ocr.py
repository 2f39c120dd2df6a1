"""Scanned documents through the HTTP app on the real stack (Tesseract, Chroma, the shipped
embedder): English and Arabic scans uploaded as PDFs and as images are found by /search at rank
1 on their page, cited by /query, highlighted on the page picture; jobs show an `ocr` stage,
list unreadable pages, and fail cleanly on bombs and without Tesseract."""

from __future__ import annotations

import io
import time
from typing import Any

import pytest
from PIL import Image

from tests.api.harness import ApiFactory, ApiHarness, ApiUser, assert_error_body
from tests.scans import SANS, image_bytes, scanned_page, scanned_pdf

pytestmark = pytest.mark.integration

ENGLISH_COVER = ["Annual report of the river authority", "Prepared by the records office."]
ENGLISH_PAGE = [
    "The north pumping station is inspected each spring.",
    "The inspection code of the station is ZEBRA-4417.",
    "Operators record the pressure readings twice a day.",
]
# Tesseract's fast Arabic model returns nothing for some lines in DejaVu Sans ("يتم فحص ..."
# comes back empty at every size): these lines are read whole (eval/ocr_quality.py measures the
# error rates over many more).
ARABIC_COVER = ["التقرير السنوي لهيئة النهر", "أعده مكتب السجلات"]
ARABIC_PAGE = [
    "تقع محطة الضخ الشمالية بالقرب من النهر الكبير",
    "رمز الصيانة للمحطة هو زنجبيل الأزرق",
    "يسجل المشغلون قراءات الضغط مرتين يوميا",
]
CASES = {
    # name: (file name, builder of the file, query, question, page with the answer)
    "english-pdf": (
        "scan-en.pdf",
        lambda: scanned_pdf([scanned_page(ENGLISH_COVER), scanned_page(ENGLISH_PAGE)]),
        "ZEBRA-4417",
        "What is the inspection code of the north pumping station?",
        2,
    ),
    "english-png": (
        "scan-en.png",
        lambda: image_bytes([scanned_page(ENGLISH_PAGE)], "PNG"),
        "ZEBRA-4417",
        "What is the inspection code of the north pumping station?",
        1,
    ),
    "arabic-pdf": (
        "scan-ar.pdf",
        lambda: scanned_pdf(
            [
                scanned_page(ARABIC_COVER, font=SANS, rtl=True),
                scanned_page(ARABIC_PAGE, font=SANS, rtl=True),
            ]
        ),
        "زنجبيل الأزرق",
        "ما هو رمز الصيانة للمحطة؟",
        2,
    ),
    "arabic-jpeg": (
        "scan-ar.jpg",
        lambda: image_bytes([scanned_page(ARABIC_PAGE, font=SANS, rtl=True)], "JPEG", quality=90),
        "زنجبيل الأزرق",
        "ما هو رمز الصيانة للمحطة؟",
        1,
    ),
}


def _upload_watching_stages(
    api: ApiHarness, user: ApiUser, name: str, content: bytes
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Upload and poll until the job ends; the final job and every progress seen on the way."""
    response = api.upload(user, name, content)
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        job = api.client.get(f"/jobs/{job_id}", headers=user.headers).json()
        seen.append(job["progress"])
        if job["status"] in ("done", "failed"):
            return job, seen
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not end: {seen[-1]}")


def _highlighted_pixels(png: bytes) -> int:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(
        1
        for r, g, b in image.getdata()  # type: ignore[misc]
        if r > 240 and 200 < g < 240 and b < 170
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_scan_is_found_cited_and_highlighted_on_its_page(api: ApiHarness, case: str) -> None:
    name, build, query, question, page = CASES[case]
    user = api.add_user(f"ocr-{case}", login=False)
    job, seen = _upload_watching_stages(api, user, name, build())
    assert job["status"] == "done", job
    assert job["warnings"] == []
    ocr_stages = [p for p in seen if p["stage"] == "ocr"]
    assert ocr_stages and all(p["total"] == page for p in ocr_stages), seen

    top = api.search(user, query)["results"][0]
    assert (top["source"], top["page"], top["page_label"]) == (name, page, str(page))
    assert top["text_source"] == "ocr" and 50 <= top["ocr_confidence"] <= 100
    assert query in " ".join(top["text"].split())

    answer = api.query(user, question)
    assert answer["citations"] and answer["citations"][0]["page"] == page, answer
    cited = answer["citations"][0]

    url = f"/documents/{cited['document_id']}/pages/{page}.png"
    response = api.client.get(url, params={"chunk": cited["chunk_id"]}, headers=user.headers)
    assert response.status_code == 200, response.text
    assert int(response.headers["X-Highlight-Boxes"]) >= 10  # the words of three lines
    assert 0.05 < float(response.headers["X-Highlight-Top"]) < 0.2  # printed near the top
    assert _highlighted_pixels(response.content) > 2000

    stats = api.client.get("/stats", headers=user.headers).json()
    assert stats["quotas"]["ocr_pages"] == {"used": page, "limit": api.settings.quota_ocr_pages}


def test_a_mixed_pdf_ocrs_only_its_scanned_page_and_lists_an_unreadable_one(
    api: ApiHarness,
) -> None:
    user = api.add_user("ocr-mixed", login=False)
    blank_scan = Image.new("L", (1240, 1754), 255)
    content = scanned_pdf(
        [
            "The harbour crane is serviced by the MARLIN team every month.",
            scanned_page(ENGLISH_PAGE),
            blank_scan,
        ]
    )
    job = api.upload_and_wait(user, "mixed.pdf", content)
    assert job["status"] == "done" and job["pages"] == 2, job
    assert job["warnings"] == ["page 3 could not be read: no text was found on it"]
    text_hit = api.search(user, "MARLIN harbour crane")["results"][0]
    assert (text_hit["page"], text_hit["text_source"], text_hit["ocr_confidence"]) == (
        1,
        "text",
        None,
    )
    scan_hit = api.search(user, "ZEBRA-4417")["results"][0]
    assert (scan_hit["page"], scan_hit["text_source"]) == (2, "ocr")
    stats = api.client.get("/stats", headers=user.headers).json()
    assert stats["quotas"]["ocr_pages"]["used"] == 2  # the unreadable page was OCR'd too


def test_bad_images_fail_cleanly_and_leave_nothing_indexed(api: ApiHarness) -> None:
    user = api.add_user("ocr-bad", login=False)
    bomb = Image.new("1", (9000, 9000), 1)  # 81 MP of white: ~10 KB as PNG
    job = api.upload_and_wait(user, "bomb.png", image_bytes([bomb], "PNG"))
    assert (job["status"], job["error_code"]) == ("failed", "document_too_large"), job
    assert "megapixels" in job["error"]
    job = api.upload_and_wait(user, "broken.webp", b"RIFF\x00\x00\x00\x00WEBPVP8 " + bytes(64))
    assert (job["status"], job["error_code"]) == ("failed", "corrupt_document"), job
    assert_error_body(api.upload(user, "scan.gif", b"GIF89a" + bytes(64)), 415)
    documents = api.client.get("/documents", headers=user.headers).json()["data"]
    assert {(d["status"], d["chunks"]) for d in documents} == {("failed", 0)}
    assert api.search(user, "ZEBRA")["results"] == []
    assert api.uploads_left() == []


def test_a_multi_frame_tiff_is_kept_as_pages_that_are_drawn(api: ApiHarness) -> None:
    user = api.add_user("ocr-tiff-pages", login=False)
    frames = [scanned_page(ENGLISH_COVER), scanned_page(ENGLISH_PAGE), scanned_page(["Notes."])]
    job = api.upload_and_wait(
        user, "scan.tiff", image_bytes(frames, "TIFF", compression="tiff_adobe_deflate")
    )
    assert (job["status"], job["pages"]) == ("done", 3), job

    answer = api.query(user, "What is the inspection code of the north pumping station?")
    cited = answer["citations"][0]
    assert (cited["source"], cited["page"]) == ("scan.tiff", 2), answer
    pages = f"/documents/{cited['document_id']}/pages"
    response = api.client.get(
        f"{pages}/2.png", params={"chunk": cited["chunk_id"]}, headers=user.headers
    )
    assert response.status_code == 200, response.text
    assert int(response.headers["X-Highlight-Boxes"]) >= 10
    assert _highlighted_pixels(response.content) > 2000
    picture = Image.open(io.BytesIO(response.content))
    assert picture.height > picture.width  # an A4 page, upright
    assert api.client.get(f"{pages}/3.png", headers=user.headers).status_code == 200
    assert_error_body(api.client.get(f"{pages}/4.png", headers=user.headers), 404)


def test_an_image_over_the_total_pixel_cap_fails_before_ocr(api_factory: ApiFactory) -> None:
    # Three A4 pages scanned at 300 dpi: 8.7 megapixels each, under the per-frame cap,
    # 26 together, over this server's cap of 20.
    api = api_factory(ocr_max_total_pixels=20_000_000)
    user = api.add_user("ocr-total-pixels", login=False)
    frames = [scanned_page(ENGLISH_PAGE)] * 3
    job = api.upload_and_wait(
        user, "scan.tiff", image_bytes(frames, "TIFF", compression="tiff_adobe_deflate")
    )
    assert (job["status"], job["error_code"]) == ("failed", "document_too_large"), job
    assert "3 frames hold 26 megapixels together, more than the limit of 20" in job["error"]
    stats = api.client.get("/stats", headers=user.headers).json()
    assert stats["quotas"]["ocr_pages"]["used"] == 0  # refused before any page was read
    assert api.search(user, "ZEBRA-4417")["results"] == []


def test_without_tesseract_scans_fail_with_the_install_hint(api_factory: ApiFactory) -> None:
    api = api_factory(ocr_tesseract_cmd="/nonexistent/bin/tesseract")
    ready = api.client.get("/ready").json()
    assert ready["features"]["ocr"].startswith("unavailable")
    assert "install tesseract-ocr" in ready["features"]["ocr"]
    user = api.add_user("ocr-missing", login=False)
    for name, content in (
        ("scan.pdf", scanned_pdf([scanned_page(ENGLISH_PAGE)])),
        ("scan.png", image_bytes([scanned_page(ENGLISH_PAGE)], "PNG")),
    ):
        job = api.upload_and_wait(user, name, content)
        assert (job["status"], job["error_code"]) == ("failed", "needs_ocr"), job
        assert "install tesseract-ocr" in job["error"]
    assert api.search(user, "inspection code ZEBRA-4417")["results"] == []


def test_ready_reports_ocr_available(api: ApiHarness) -> None:
    assert api.client.get("/ready").json()["features"] == {"ocr": "available"}
