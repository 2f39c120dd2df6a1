"""Rendering a cited PDF page: in this process vs in a child process (the served path).

`python -m bench.page_render` prints median and p95 per way, and the ratio; the page is an A4
page of text, 1600 px on its longest side, one passage highlighted.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import app.ingestion.timeout  # noqa: F401  (sets the fork server's preload, as in the service)
from app.rendering.pdf_page import Passage, RenderedPage, render_page, render_page_isolated

ROUNDS = 15
SENTENCE = "The mast bolts are tightened to 45 newton metres with the blue torque wrench. "


def _pdf(path: Path) -> None:
    from fpdf import FPDF  # here: every render child re-imports this module as its __main__

    document = FPDF()
    document.set_font("Helvetica", size=11)
    document.add_page()
    document.multi_cell(0, 6, SENTENCE * 40)
    document.output(str(path))


def _times(render: Callable[..., RenderedPage], path: Path) -> list[float]:
    passage = Passage(SENTENCE * 2, 0.3)
    render(path, 1, 1600, passage)  # warm
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        render(path, 1, 1600, passage)
        times.append((time.perf_counter() - started) * 1000)
    return sorted(times)


def main() -> None:
    """Print the table."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "page.pdf"
        _pdf(path)
        rows = [("in process", _times(render_page, path))]
        rows.append(("child process (served)", _times(render_page_isolated, path)))
    base = statistics.median(rows[0][1])
    print(f"{'workload':<24} {'median ms':>10} {'p95 ms':>8} {'ratio':>6}")
    for name, times in rows:
        median = statistics.median(times)
        p95 = times[int(0.95 * (len(times) - 1))]
        print(f"{name:<24} {median:>10.1f} {p95:>8.1f} {median / base:>6.2f}")


if __name__ == "__main__":
    main()
