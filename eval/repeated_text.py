"""Boilerplate by repetition: demote chunks whose text recurs in other manuals, leave-one-out.

A licence or a standard notice reads the same in every document that carries it. Each chunk's
share of 8-word shingles that also occur in another manual of the set (every installed manual,
held-out ones included, read as the service's loader reads them) marks it as repeated; the
shipped order then moves chunks at or above a share `t` down `shift` places. Parameters are
chosen on 14 development manuals (`--guard 1`, as eval/manuals_loo.py) and read on the 15th,
and on the held-out R-intro with the parameters chosen on all 15.

    python -m eval.repeated_text
"""

from __future__ import annotations

import re
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from app.config import load_settings
from app.domain import Chunk
from app.ingestion.loaders.pdf import load_pdf
from app.ingestion.parse_limits import LoadLimits
from app.retrieval.hybrid import RetrieverConfig
from eval.fusion_families import TODAYS_RULES, _service
from eval.manual_questions import ALL_SOURCES, KNOWN_SOURCES, readable_pdf
from eval.manuals_loo import Asked, asked_for, better_arm, choose, summary

SHINGLE_WORDS = 8
GRID: list[dict[str, Any]] = [{"shift": 0, "t": 1.0}] + [
    {"shift": shift, "t": t} for shift in (2, 5, 10) for t in (0.3, 0.5, 0.8)
]


def shingles(text: str, n: int = SHINGLE_WORDS) -> set[str]:
    """The text's runs of n words (casefolded)."""
    words = re.findall(r"\w+", text.casefold())
    return {" ".join(words[i : i + n]) for i in range(max(0, len(words) - n + 1))}


class Repetition:
    """Which manuals hold each shingle, and each chunk's share of shingles found elsewhere."""

    def __init__(self) -> None:
        self.owners: dict[str, set[str]] = defaultdict(set)
        for manual, source in KNOWN_SOURCES.items():
            for page in load_pdf(readable_pdf(source.path), LoadLimits()):
                for shingle in shingles(page.text):
                    self.owners[shingle].add(manual)
        self._share: dict[str, float] = {}

    def share(self, manual: str, chunk: Chunk) -> float:
        """Share of the chunk's shingles that another manual also holds."""
        if chunk.id not in self._share:
            own = shingles(chunk.text)
            elsewhere = sum(1 for s in own if self.owners.get(s, set()) - {manual})
            self._share[chunk.id] = elsewhere / len(own) if own else 0.0
        return self._share[chunk.id]


def demoted(asked: Asked, manual: str, repetition: Repetition, p: dict[str, Any]) -> list[str]:
    """The shipped order with repeated chunks `shift` places down (exact matches stay first)."""
    recall = asked.recall
    ordered = _service(recall, asked.question.text, dict(TODAYS_RULES[0]))
    if p["shift"] <= 0:
        return ordered
    pinned = set(recall.pinned)

    def key(item: tuple[int, str]) -> tuple[int, int]:
        position, cid = item
        chunk = recall.candidates[cid].chunk
        repeated = cid not in pinned and chunk is not None
        repeated = repeated and chunk is not None and repetition.share(manual, chunk) >= p["t"]
        return (0 if cid in pinned else 1, position + (p["shift"] if repeated else 0))

    return [cid for _, cid in sorted(enumerate(ordered), key=key)]


def main() -> None:
    repetition = Repetition()
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(_env_file=None, data_dir=Path(data), env="development")
        config = RetrieverConfig.from_settings(settings)
        installed = [m for m, s in KNOWN_SOURCES.items() if s.path.is_file()]
        sets = asked_for(installed, settings, refresh=False)
    table = []
    for p in GRID:
        row: dict[str, Any] = {"params": p}
        for manual, asked in sets.items():

            def order(a: Asked, m: str = manual, p: dict[str, Any] = p) -> list[str]:
                return demoted(a, m, repetition, p)

            row[manual] = summary(asked, order)
        table.append(row)
    dev = [m for m in sets if m in ALL_SOURCES]
    base = table[0]
    for row in table:
        mean = statistics.fmean(row[m]["mrr@10"] for m in dev)
        moved = ", ".join(
            f"{m} {row[m]['mrr@10'] - base[m]['mrr@10']:+.3f}"
            for m in sets
            if abs(row[m]["mrr@10"] - base[m]["mrr@10"]) > 1e-9
        )
        print(f"{row['params']}: mean MRR@10 {mean:.4f} ({moved or 'no manual moves'})")
    arms = better_arm({m: sets[m] for m in dev}, config)
    deltas = {}
    for manual in dev:
        best = choose(table, [m for m in dev if m != manual], arms, 1.0)
        deltas[manual] = best[manual]["mrr@10"] - base[manual]["mrr@10"]
        print(f"left out {manual}: chose {best['params']}, MRR {deltas[manual]:+.3f}")
    print(f"leave-one-out mean MRR change {statistics.fmean(deltas.values()):+.4f}")
    for manual in (m for m in sets if m not in ALL_SOURCES):
        best = choose(table, dev, arms, 1.0)
        change = best[manual]["mrr@10"] - base[manual]["mrr@10"]
        print(f"held out {manual}: chose {best['params']}, MRR {change:+.3f}")


if __name__ == "__main__":
    main()
