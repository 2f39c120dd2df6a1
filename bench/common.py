"""Small helpers shared by the benchmarks: percentiles, a markdown table, extra server settings."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence


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
