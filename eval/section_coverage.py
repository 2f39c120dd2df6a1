"""Section-path coverage per PDF: how many chunks the service's own pipeline gives a path.

Each PDF is parsed and chunked exactly as an upload is (`app.services.blocks.pipeline.parse_file`,
the parse child included, with the default settings), then counted: pages, outline entries (every
bookmark, resolvable or not), chunks, the share of chunks with a section path, the pages given a
role (contents, index, ...) and the parse time. Nothing is embedded or stored.

    python -m eval.section_coverage                          # the R manuals, gnuplot, every PDF
                                                             # under /usr/share/doc
    python -m eval.section_coverage a.pdf b.pdf --save after.json
    python -m eval.section_coverage --compare before.json    # before/after columns

`--compare` reads a `--save` file of an earlier run (the same command on an older checkout,
e.g. `PYTHONPATH=/old/checkout python eval/section_coverage.py --save before.json`) and prints
each PDF's chunks and coverage before and after.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pypdf import PdfReader

from app.config import load_settings
from app.domain import section_path
from app.errors import IngestionError
from app.services.blocks.pipeline import PipelineConfig, parse_file

R_MANUALS = Path("/usr/share/R/doc/manual")
GNUPLOT = Path("/usr/share/doc/gnuplot/gnuplot.pdf")
DOC_ROOT = Path("/usr/share/doc")


@dataclass(frozen=True)
class Coverage:
    """One PDF's counts."""

    name: str
    pages: int
    outline_entries: int
    chunks: int
    with_path: int
    role_pages: int
    parse_s: float
    error: str = ""

    @property
    def share(self) -> float:
        """The share of chunks with a section path."""
        return self.with_path / self.chunks if self.chunks else 0.0


def default_pdfs() -> list[Path]:
    """The R manuals, the gnuplot manual and every other PDF under /usr/share/doc."""
    found = sorted(R_MANUALS.glob("*.pdf")) + ([GNUPLOT] if GNUPLOT.exists() else [])
    found += sorted(p for p in DOC_ROOT.rglob("*.pdf") if p.is_file() and p != GNUPLOT)
    unique: dict[Path, Path] = {}
    for path in found:  # /usr/share/doc/r-doc-pdf links to the R manuals
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def count_outline(path: Path) -> int:
    """Every outline entry (bookmark) of the PDF, at any depth; 0 when it has none or is broken."""

    def count(items: Iterable[Any]) -> int:
        return sum(count(item) if isinstance(item, list) else 1 for item in items)

    try:
        return count(PdfReader(path).outline)
    except Exception:  # an unreadable outline counts as none, as the loader treats it
        return 0


def measure(path: Path, config: PipelineConfig) -> Coverage:
    """Parse and chunk one PDF as an upload is, and count."""
    started = time.perf_counter()
    try:
        parsed = parse_file(path, tenant_id="coverage", source=path.name, config=config)
    except IngestionError as exc:
        return Coverage(path.name, 0, count_outline(path), 0, 0, 0, 0.0, type(exc).__name__)
    elapsed = time.perf_counter() - started
    chunks = parsed.chunks
    role_pages = len({c.page for c in chunks if c.page_role is not None})
    return Coverage(
        name=path.name,
        pages=parsed.pages,
        outline_entries=count_outline(path),
        chunks=len(chunks),
        with_path=sum(section_path(c) is not None for c in chunks),
        role_pages=role_pages,
        parse_s=round(elapsed, 2),
    )


def _table(rows: list[Coverage], before: dict[str, dict[str, Any]]) -> str:
    head = "| PDF | pages | outline entries | chunks | with a section path | role pages | parse s |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for row in rows:
        old = before.get(row.name)
        if old is None:
            cells = [row.chunks, f"{row.share:.3f}", row.role_pages, f"{row.parse_s:.1f}"]
        else:
            share = old["with_path"] / old["chunks"] if old["chunks"] else 0.0
            cells = [
                f"{old['chunks']} -> {row.chunks}",
                f"{share:.3f} -> {row.share:.3f}",
                f"{old['role_pages']} -> {row.role_pages}",
                f"{old['parse_s']:.1f} -> {row.parse_s:.1f}",
            ]
        name = f"{row.name} ({row.error})" if row.error else row.name
        lines.append(
            f"| {name} | {row.pages} | {row.outline_entries} | "
            + " | ".join(map(str, cells))
            + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the coverage table of the given PDFs (or the default set)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pdfs", nargs="*", type=Path, help="PDF files (default: see above)")
    parser.add_argument("--save", type=Path, help="write the counts as JSON")
    parser.add_argument("--compare", type=Path, help="a --save file of an earlier run")
    args = parser.parse_args(argv)
    config = PipelineConfig.from_settings(load_settings(_env_file=None))
    rows = []
    for path in args.pdfs or default_pdfs():
        rows.append(measure(path, config))
        print(f"{path}: {rows[-1]}", file=sys.stderr, flush=True)
    before: dict[str, dict[str, Any]] = {}
    if args.compare:
        before = {row["name"]: row for row in json.loads(args.compare.read_text())}
    print(_table(rows, before))
    if args.save:
        args.save.write_text(json.dumps([asdict(row) for row in rows], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
