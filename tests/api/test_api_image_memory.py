"""An image that decodes to gigabytes, against a live server (threads backend: jobs run in the API
process): a TIFF of one text frame and large blank deflate frames, a few MB on disk and gigabytes
decoded, is read and kept as page pictures without the server's resident memory growing by more than
a little. Before the fix the API process decoded every frame into a list to write the kept PDF
(+4 GB measured by the audit for 15 such frames)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from raw_http import rss_kib

from testkit.live_server import LiveServer
from tests.scans import blank_frames_tiff, scanned_page

pytestmark = pytest.mark.integration

PASSWORD = "a long enough password"
BLANK_FRAMES = 4  # 7700 x 7700 RGB: 178 MB each decoded, 712 MB together
MAX_GROWTH_KIB = 150 * 1024
TEXT = [
    "The north pumping station is inspected each spring.",
    "The inspection code of the station is ZEBRA-4417.",
]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("image-memory") / "data")
    server.create_user("scans", "operator", PASSWORD)
    with server.running():
        yield server


def _headers(live: LiveServer) -> dict[str, str]:
    response = httpx.post(
        f"{live.url}/auth/token", data={"username": "operator", "password": PASSWORD}
    )
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


def _upload_and_wait(
    live: LiveServer, headers: dict[str, str], name: str, content: bytes
) -> dict[str, Any]:
    response = httpx.post(
        f"{live.url}/documents", files={"file": (name, content)}, headers=headers, timeout=60
    )
    assert response.status_code == 202, response.text
    job_url = f"{live.url}/jobs/{response.json()['job_id']}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        job: dict[str, Any] = httpx.get(job_url, headers=headers).json()
        if job["status"] in ("done", "failed"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job did not end: {job}")


def _reset_peak(pid: int) -> None:
    """Start VmHWM again from the current resident size (Linux: clear_refs 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5", encoding="ascii")


def test_an_image_of_large_blank_frames_does_not_grow_the_server(live: LiveServer) -> None:
    assert live.process is not None
    pid = live.process.pid
    headers = _headers(live)
    # Warm up: the first job loads what every job uses (embedder, stores).
    warm = _upload_and_wait(live, headers, "warm.txt", b"The crane is serviced monthly. " * 40)
    assert warm["status"] == "done", warm
    content = blank_frames_tiff(scanned_page(TEXT), BLANK_FRAMES)
    assert len(content) < 5 * 1024 * 1024  # small on disk

    _reset_peak(pid)
    before, _ = rss_kib(pid)
    job = _upload_and_wait(live, headers, "blanks.tiff", content)
    after, peak = rss_kib(pid)
    growth = peak - before
    print(
        f"\nserver RSS before {before / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB "
        f"(+{growth / 1024:.0f} MiB), after {after / 1024:.0f} MiB"
    )
    assert job["status"] == "done", job
    assert len(job["warnings"]) == BLANK_FRAMES  # the blank frames: OCR found no text
    assert growth < MAX_GROWTH_KIB, f"server peak RSS grew by {growth / 1024:.0f} MiB"

    # The text frame is found, and its kept page is drawn.
    found = httpx.post(f"{live.url}/search", json={"query": "ZEBRA-4417"}, headers=headers)
    top = found.json()["results"][0]
    assert (top["source"], top["page"]) == ("blanks.tiff", 1), top
    picture = httpx.get(
        f"{live.url}/documents/{top['document_id']}/pages/1.png", headers=headers, timeout=60
    )
    assert picture.status_code == 200, picture.text
