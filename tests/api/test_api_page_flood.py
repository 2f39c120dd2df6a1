"""A live server (`python -m app.serve`): one tenant floods it with 60 concurrent page-picture
requests, one of them for a page PDFium paints for tens of seconds (bench/README.md: measured
in process), while another tenant searches. The other tenant does not notice, and every picture
request is answered within 30 s: drawn, beyond the document, failed, or refused with a wait."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.common import percentile
from bench.page_render import flood_server, flood_settings, measure_flood, print_flood

pytestmark = pytest.mark.integration

FLOOD = 60
# Lowered from the default 20 s to keep the test short: the heavy page runs far longer anyway.
RENDER_TIMEOUT_S = 4.0


def test_a_flood_of_page_pictures_does_not_stall_another_tenant(tmp_path: Path) -> None:
    with flood_server(tmp_path / "data", flood_settings(RENDER_TIMEOUT_S)) as server:
        report = asyncio.run(measure_flood(server.url, flood=FLOOD, quiet_probes=5))
        log = server.log()
    print_flood(report)
    pictures = report.pictures
    assert len(pictures) == FLOOD
    assert {p.status for p in pictures} <= {200, 404, 409, 429, 503}, report.statuses()
    assert report.all_answered_s < 30.0, report.all_answered_s
    # The heavy page held a render slot until the timeout stopped it; the same page asked again
    # later is refused (its own share of the slots is taken) or answered from the failure memo.
    heavy = [p for p in pictures if p.kind == "heavy"]
    assert heavy[0].status == 409 and heavy[0].seconds >= RENDER_TIMEOUT_S, heavy[0]
    assert all(p.status in (409, 429, 503) for p in heavy), report.statuses()
    assert all(p.status == 404 for p in pictures if p.kind == "beyond")
    refused = [p for p in pictures if p.status in (429, 503)]
    assert refused and all(p.retry_after and int(p.retry_after) >= 1 for p in refused)
    # The ordinary pages were drawn in the other slot's turn or refused at once: A's share (one
    # of the two slots) was taken by the heavy page, and the other slot is kept for others.
    assert all(p.status in (200, 429, 503) for p in pictures if p.kind == "ordinary")
    # The other tenant: no errors (a failed probe raises), fast searches and health checks.
    search, health = report.flood["/search"], report.flood["/health"]
    assert len(search) >= 3 and len(health) >= 3, "B's probes did not run during the flood"
    assert percentile(search, 95) < 1.0, sorted(search)[-5:]
    assert percentile(health, 95) < 0.5, sorted(health)[-5:]
    assert "Traceback" not in log
