"""Small helpers shared by the benchmarks: percentiles, a markdown table, extra server settings."""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Sequence
from pathlib import Path


def process_tree(pid: int) -> list[int]:
    """`pid` and its live descendants (parse and embedding children, uvicorn workers); Linux."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        try:  # each thread lists the children it started
            tasks = list(Path(f"/proc/{current}/task").iterdir())
        except OSError:
            continue  # exited meanwhile
        found.append(current)
        for task in tasks:
            try:
                todo.extend(int(child) for child in (task / "children").read_text().split())
            except OSError:
                continue
    return found


def process_rss_mb(pid: int) -> float:
    """Resident memory of a process and its children, MB."""
    total = 0.0
    for member in process_tree(pid):
        try:
            total += int(Path(f"/proc/{member}/statm").read_text().split()[1]) * 4096 / 2**20
        except OSError:
            continue
    return total


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its live children: unlike the wall clock,
    what other jobs on a shared machine do not inflate."""
    total = 0.0
    for member in process_tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def percentile(values: Sequence[float], pct: float) -> float:
    """The pct-th percentile (nearest rank) of values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(pct / 100.0 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def median(values: Sequence[float]) -> float:
    """The median of values."""
    return statistics.median(values) if values else float("nan")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table, numbers formatted compactly."""

    def fmt(value: object) -> str:
        if isinstance(value, float):
            return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def add_server_setting_option(parser: argparse.ArgumentParser, example: str) -> None:
    """Add `--set RAG_NAME=VALUE` (repeatable): extra settings for the server under test."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="RAG_NAME=VALUE",
        help=f"extra server setting, e.g. --set {example} (repeatable)",
    )


def server_settings_given(items: Sequence[str]) -> dict[str, str]:
    """The `--set` values as environment variables for the server."""
    return dict(item.split("=", 1) for item in items)


def quiet_vs_loaded_row(
    label: str, quiet: Sequence[float], loaded: Sequence[float]
) -> list[object]:
    """A latency row in ms: count, p50 and p95 when quiet, then count, p50, p95 and max loaded."""
    return [
        label,
        len(quiet),
        round(median(quiet) * 1000, 1),
        round(percentile(quiet, 95) * 1000, 1),
        len(loaded),
        round(median(loaded) * 1000, 1),
        round(percentile(loaded, 95) * 1000, 1),
        round(max(loaded) * 1000, 1),
    ]
