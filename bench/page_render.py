"""Cited PDF page pictures: the cost of one render, and a flood of picture requests.

`python -m bench.page_render` prints, first, median and p95 per way of rendering an A4 page of
text (1600 px on its longest side, one passage highlighted): in this process vs in a limited
child process (the served path), and the ratio; and how long PDFium really takes to paint the
heavy vector drawing of the flood (one in-process render, no timeout).

Then the flood: a real `python -m app.serve` (live server, one process) where tenant A sends
`--flood` concurrent picture requests at once (a third for the heavy page, the rest for pages of
an ordinary PDF, a few beyond its end) while tenant B loops over /search and /health. It prints
B's p50/p95 quiet and during the flood, A's statuses and the time until every picture request
was answered.

    python -m bench.page_render [--flood 60] [--skip-renders] [--set RAG_X=v]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import app.ingestion.timeout  # noqa: F401  (sets the fork server's preload, as in the service)
from app.rendering.isolated import render_page_isolated
from app.rendering.pdf_page import Passage, RenderedPage, RenderLimits, render_page
from bench.common import (
    add_server_setting_option,
    median,
    quiet_vs_loaded_row,
    server_settings_given,
    table,
)

if TYPE_CHECKING:
    import httpx

    from testkit.live_server import LiveServer

# The flood's modules (an HTTP client, the live server) are imported where they are used: every
# render child re-imports this module as its __main__, and should stay as light as the service's.

ROUNDS = 15
SENTENCE = "The mast bolts are tightened to 45 newton metres with the blue torque wrench. "
TENANT_A, TENANT_B = "pictures-a", "searcher-b"
CLIENT_TIMEOUT_S = 120.0  # far beyond any bound of the server: a timeout means it hung
ORDINARY_PAGES = 10
FIRST_LEAD_S = 0.3  # the heavy page's first request is sent this much before the others


def heavy_pdf() -> bytes:
    """The flood's heavy page (page 2; page 1 is ordinary text)."""
    from testkit.builders import heavy_drawing_pdf

    return heavy_drawing_pdf("Cover of the OSPREY wiring book.", "The OSPREY wiring diagram.")


def ordinary_pdf() -> bytes:
    """An ordinary PDF of `ORDINARY_PAGES` pages of text."""
    from testkit.builders import pdf_document

    return pdf_document(*(f"Page {n} of the OSPREY handbook. {SENTENCE}" for n in range(1, 11)))


def _pdf(path: Path) -> None:
    from fpdf import FPDF  # here: every render child re-imports this module as its __main__

    document = FPDF()
    document.set_font("Helvetica", size=11)
    document.add_page()
    document.multi_cell(0, 6, SENTENCE * 40)
    document.output(str(path))


def _times(render: Callable[..., RenderedPage], path: Path) -> list[float]:
    passage = Passage(SENTENCE * 2, 0.3)
    limits = RenderLimits(1600, max_memory_bytes=1024 * 1024 * 1024, max_cpu_s=30)
    render(path, 1, limits, passage)  # warm
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        render(path, 1, limits, passage)
        times.append((time.perf_counter() - started) * 1000)
    return sorted(times)


def render_table() -> None:
    """One page's render, in process vs in a child; then the heavy page once, in process."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "page.pdf"
        _pdf(path)
        rows = [("in process", _times(render_page, path))]
        rows.append(("child process (served)", _times(render_page_isolated, path)))
        heavy = Path(folder) / "heavy.pdf"
        heavy.write_bytes(heavy_pdf())
        started = time.perf_counter()
        render_page(heavy, 2, RenderLimits(1600))
        heavy_s = time.perf_counter() - started
    base = statistics.median(rows[0][1])
    print(f"{'workload':<24} {'median ms':>10} {'p95 ms':>8} {'ratio':>6}")
    for name, times in rows:
        middle = statistics.median(times)
        p95 = times[int(0.95 * (len(times) - 1))]
        print(f"{name:<24} {middle:>10.1f} {p95:>8.1f} {middle / base:>6.2f}")
    print(f"\nheavy drawing page, in process, no timeout: {heavy_s:.1f} s")


@dataclass
class Picture:
    """One picture request of the flood: what it asked for, its status and latency."""

    kind: str  # heavy | ordinary | beyond
    status: int | None  # None: transport error or client timeout
    seconds: float
    retry_after: str | None = None


@dataclass
class FloodReport:
    """B's probe latencies (seconds), quiet and during the flood, and A's pictures."""

    quiet: dict[str, list[float]] = field(default_factory=dict)
    flood: dict[str, list[float]] = field(default_factory=dict)
    pictures: list[Picture] = field(default_factory=list)
    all_answered_s: float = 0.0

    def statuses(self) -> dict[str, int]:
        """How many picture requests got each status, per kind."""
        counts: dict[str, int] = {}
        for picture in self.pictures:
            key = f"{picture.kind} {picture.status}"
            counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items()))


def flood_settings(render_timeout_s: float) -> dict[str, str]:
    """Server settings: the extractive answerer, generous limits except the page routes'."""
    return {
        "RAG_PAGE_RENDER_TIMEOUT_S": str(render_timeout_s),
        "RAG_RATE_LIMIT_QUERY_PER_MINUTE": "100000",
        "RAG_RATE_LIMIT_AUTH_PER_MINUTE": "1000",
    }


@contextmanager
def flood_server(data_dir: Path, extra: dict[str, str]) -> Iterator[LiveServer]:
    """A started live server with one user in each tenant."""
    from bench.noisy_neighbour import PASSWORD
    from testkit.live_server import LiveServer

    server = LiveServer(data_dir, extra)
    for tenant, name in ((TENANT_A, "flooder"), (TENANT_B, "searcher")):
        server.cli(
            "create-user", "--tenant", tenant, "--username", name, "--password-stdin",
            stdin=PASSWORD + "\n",
        )  # fmt: skip
    server.start(timeout_s=300)
    try:
        yield server
    finally:
        server.stop()


async def _upload(
    client: httpx.AsyncClient, headers: dict[str, str], name: str, content: bytes
) -> str:
    response = await client.post("/documents", files={"file": (name, content)}, headers=headers)
    response.raise_for_status()
    job_id = response.json()["job_id"]
    while True:
        job = (await client.get(f"/jobs/{job_id}", headers=headers)).json()
        if job["status"] == "done":
            document_id: str = job["document_id"]
            return document_id
        if job["status"] == "failed":
            raise RuntimeError(f"upload failed: {job}")
        await asyncio.sleep(0.2)


def flood_requests(heavy: str, ordinary: str, count: int) -> list[tuple[str, str]]:
    """(kind, path) of `count` picture requests: a third for the heavy page (the first among
    them), a few beyond the ordinary PDF's end, the rest for its pages."""
    requests = []
    for n in range(count):
        if n % 3 == 0:
            requests.append(("heavy", f"/documents/{heavy}/pages/2.png"))
        elif n % 10 == 1:
            requests.append(("beyond", f"/documents/{ordinary}/pages/{ORDINARY_PAGES + n}.png"))
        else:
            page = n % ORDINARY_PAGES + 1
            requests.append(("ordinary", f"/documents/{ordinary}/pages/{page}.png"))
    return requests


async def _picture(
    client: httpx.AsyncClient, headers: dict[str, str], kind: str, path: str
) -> Picture:
    import httpx

    started = time.perf_counter()
    try:
        response = await client.get(path, headers=headers)
    except httpx.TransportError:
        return Picture(kind, None, time.perf_counter() - started)
    seconds = time.perf_counter() - started
    return Picture(kind, response.status_code, seconds, response.headers.get("Retry-After"))


async def measure_flood(url: str, *, flood: int, quiet_probes: int) -> FloodReport:
    """Quiet probes by B, then A's flood with B's probes running alongside."""
    import httpx

    from bench.noisy_neighbour import _login, _probe_loop, manual

    report = FloodReport()
    limits = httpx.Limits(max_connections=flood + 8)
    async with httpx.AsyncClient(base_url=url, timeout=CLIENT_TIMEOUT_S, limits=limits) as client:
        a_headers = await _login(client, "flooder")
        b_headers = await _login(client, "searcher")
        heavy = await _upload(client, a_headers, "wiring.pdf", heavy_pdf())
        ordinary = await _upload(client, a_headers, "handbook.pdf", ordinary_pdf())
        await _upload(client, b_headers, "manual.txt", manual("Bow"))
        await _probe_loop(client, "/search", b_headers, count=2)  # builds B's keyword index
        for route in ("/search", "/health"):
            report.quiet[route] = await _probe_loop(client, route, b_headers, count=quiet_probes)

        done = asyncio.Event()
        probes = [
            asyncio.create_task(_probe_loop(client, route, b_headers, until=done))
            for route in ("/search", "/health")
        ]
        started = time.perf_counter()
        requests = flood_requests(heavy, ordinary, flood)
        # The heavy page goes first, so it is the render that holds a slot during the flood.
        first = asyncio.create_task(_picture(client, a_headers, *requests[0]))
        await asyncio.sleep(FIRST_LEAD_S)
        rest = await asyncio.gather(
            *(_picture(client, a_headers, kind, path) for kind, path in requests[1:])
        )
        report.pictures = [await first, *rest]
        report.all_answered_s = time.perf_counter() - started
        done.set()
        for route, task in zip(("/search", "/health"), probes, strict=True):
            report.flood[route] = await task
    return report


def print_flood(report: FloodReport) -> None:
    """B's latency table (quiet vs flood), then what A's pictures got."""
    rows = [
        quiet_vs_loaded_row(f"B {route}", report.quiet[route], report.flood[route])
        for route in ("/search", "/health")
    ]
    headers = ["workload", "quiet n", "quiet p50 ms", "quiet p95 ms"]
    headers += ["flood n", "flood p50 ms", "flood p95 ms", "flood max ms"]
    print(table(headers, rows))
    seconds = [picture.seconds for picture in report.pictures]
    print(
        f"\nA's flood: {len(report.pictures)} picture requests, every one answered after "
        f"{report.all_answered_s:.1f} s (p50 {median(seconds):.2f} s, max {max(seconds):.1f} s)"
    )
    print(f"  statuses: {report.statuses()}")


def main() -> None:
    """Print the render table, then run the flood and print its report."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--flood", type=int, default=60, help="A's concurrent picture requests")
    parser.add_argument("--quiet-probes", type=int, default=20)
    parser.add_argument("--render-timeout", type=float, default=20.0, help="server's, seconds")
    parser.add_argument("--skip-renders", action="store_true", help="only the flood")
    add_server_setting_option(parser, "RAG_PAGE_RENDER_SLOTS=2")
    args = parser.parse_args()
    if not args.skip_renders:
        render_table()
    settings = flood_settings(args.render_timeout) | server_settings_given(args.set)
    with tempfile.TemporaryDirectory() as tmp, flood_server(Path(tmp) / "data", settings) as server:
        report = asyncio.run(
            measure_flood(server.url, flood=args.flood, quiet_probes=args.quiet_probes)
        )
    print(f"\nsettings: {settings}")
    print_flood(report)


if __name__ == "__main__":
    main()
