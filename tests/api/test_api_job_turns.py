"""A long scan cannot hold an ingestion worker for hours: every run of a
job has a total time limit on the threads backend too (RAG_JOB_TIMEOUT_S), and a scan OCRs its
pages in turns, giving the worker to another tenant's waiting job between turns.

Real stack (the threads backend, Chroma, the `use` embedder); Tesseract is a stand-in script
that takes a set time per page and logs each page it reads, so pages and time are exact.
"""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

from testkit.builders import text_document
from tests.api.harness import ApiFactory, ApiHarness, ApiUser
from tests.scans import scanned_page, scanned_pdf

pytestmark = pytest.mark.integration

TSV_HEADER = (
    "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext"
)


def slow_tesseract(folder: Path, seconds_per_page: float) -> tuple[Path, Path]:
    """A Tesseract stand-in taking `seconds_per_page` per page; (its command, its log: one line
    per page started, its process id, then `read` once it has read the page)."""
    log = folder / "pages.log"
    script = folder / "tesseract"
    words = "\n".join(
        f"5\\t1\\t1\\t1\\t1\\t{i}\\t{10 + 60 * i}\\t10\\t50\\t20\\t95\\t{word}"
        for i, word in enumerate(["scanned", "ledger", "of", "the", "night", "crew"], start=1)
    )
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--list-langs" ]; then '
        'printf "List of available languages (2):\\neng\\nara\\n"; exit 0; fi\n'
        "cat > /dev/null\n"
        f'echo $$ >> "{log}"\n'
        f"sleep {seconds_per_page}\n"
        f'echo read >> "{log}"\n'
        f'printf "{TSV_HEADER.replace(chr(9), chr(92) + "t")}\\n{words}\\n"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script, log


def scan(pages: int) -> bytes:
    """An image-only PDF of `pages` small scanned pages."""
    return scanned_pdf([scanned_page([f"page {n}"], dpi=100) for n in range(pages)], dpi=100)


def readers(log: Path) -> list[int]:
    """The process ids of the pages started."""
    lines = log.read_text().split() if log.exists() else []
    return [int(line) for line in lines if line != "read"]


def pages_read(log: Path) -> int:
    """Pages read to the end."""
    return log.read_text().split().count("read") if log.exists() else 0


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie waiting to be reaped does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def job(api: ApiHarness, user: ApiUser, job_id: str) -> dict[str, object]:
    response = api.client.get(f"/jobs/{job_id}", headers=user.headers)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def test_a_job_over_its_total_time_limit_fails_and_its_ocr_is_stopped(
    api_factory: ApiFactory, tmp_path: Path
) -> None:
    # 12 pages at 1 s each would take 12 s; the job may take 3 s in all. (With 2 s, a loaded CI
    # machine once spent them before the first page was read to its end.)
    tesseract, log = slow_tesseract(tmp_path, 1.0)
    api = api_factory(job_timeout_s=3, ocr_tesseract_cmd=str(tesseract), worker_pool_size=1)
    user = api.add_user("scans")
    started = time.monotonic()
    response = api.upload(user, "long-scan.pdf", scan(12))
    assert response.status_code == 202, response.text
    ended = api.wait_for_job(user, response.json()["job_id"], timeout_s=60)
    took = time.monotonic() - started
    assert ended["status"] == "failed", ended
    assert ended["error_code"] == "job_timeout"
    assert "time limit of 3 s" in ended["error"]
    assert took < 10, took
    assert readers(log), "the job was stopped before its OCR started"
    read = pages_read(log)
    assert read < 12
    time.sleep(1.5)  # a page being read when the job was stopped is stopped with it
    assert [pid for pid in readers(log) if alive(pid)] == []
    assert pages_read(log) == read  # nothing read after the job ended
    assert api.uploads_left() == []  # neither the upload nor its kept pages stay behind
    listed = api.client.get("/documents", headers=user.headers).json()["data"]
    assert [d["status"] for d in listed] == ["failed"]


def test_another_tenants_small_upload_is_done_while_a_long_scan_runs(
    api_factory: ApiFactory, tmp_path: Path
) -> None:
    # One worker thread; the scan reads a page per 0.5 s and yields after every page when
    # another tenant waits. Before, the small upload waited for the whole scan.
    tesseract, log = slow_tesseract(tmp_path, 0.5)
    api = api_factory(worker_pool_size=1, ocr_pages_per_turn=1, ocr_tesseract_cmd=str(tesseract))
    scanner, other = api.add_user("scanner"), api.add_user("small")
    response = api.upload(scanner, "long-scan.pdf", scan(10))
    assert response.status_code == 202, response.text
    scan_id = response.json()["job_id"]
    deadline = time.monotonic() + 60
    while not readers(log):  # the scan is being read
        assert time.monotonic() < deadline, job(api, scanner, scan_id)
        time.sleep(0.05)

    small = api.upload_and_wait(other, "note.txt", text_document("The pump is serviced weekly."))
    assert small["status"] == "done", small
    assert job(api, scanner, scan_id)["status"] in ("queued", "processing")

    ended = api.wait_for_job(scanner, scan_id, timeout_s=120)
    assert ended["status"] == "done", ended
    assert ended["pages"] == 10
    # Each page read to the end once: a resumed turn starts after the pages kept (a page being
    # read when the job yielded is read again, so at most one per turn is started twice).
    assert pages_read(log) == 10
    assert api.search(scanner, "night crew ledger")["results"]
    assert api.uploads_left() == []
