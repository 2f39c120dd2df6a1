"""How often the model is shown a gold page of a natural manual question, per passage limit.

Most answers on the development manuals that miss a gold page never showed it to the model
(`eval.answers --tasks manuals`: cause `gold_not_shown`). This asks the same fixed-seed sample
of both halves through the service's retriever, without the model, and counts the questions
whose shown passages (after `PassageLimits`: passage count, character cap, focus cut) hold a
gold page, for a grid of limits: the ceiling each limit puts on citing a gold page.

    python -m eval.shown_gold [--questions 45] [--seed 2026]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from app.config import load_settings
from app.container import Container
from app.domain import SearchHit
from app.generation.answer_limits import PassageLimits
from eval.manual_questions import GOLD_FILE, ingest_manual
from eval.manual_sample import sample_manual_questions
from eval.metrics import cites_gold
from eval.retrieval import RESULTS_DIR

# (max passages, focus characters): today's (3, 700), more passages, a larger focus budget.
GRID = ((3, 700), (4, 700), (5, 700), (3, 1000), (4, 1000), (5, 1000), (3, 0), (5, 0))


def gold_shown_by_limits(
    question: str,
    hits: Sequence[SearchHit],
    gold_pages: list[int],
    limits: PassageLimits,
    grid: Sequence[tuple[int, int]] = GRID,
) -> dict[tuple[int, int], bool]:
    """(max passages, focus characters) -> whether the passages shown under `limits` changed
    to them hold a gold page."""
    return {
        (passages, focus): cites_gold(
            (
                hit.chunk.page
                for hit in replace(limits, max_passages=passages, focus_chars=focus).shown(
                    question, hits
                )
            ),
            gold_pages,
        )
        for passages, focus in grid
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=45)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    gold: dict[str, list[int]] = json.loads(GOLD_FILE.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(
            _env_file=None, data_dir=Path(data), embedding_provider="use", env="development"
        )
        container = Container(settings)
        limits = PassageLimits.from_settings(settings)
        halves = {
            s: sample_manual_questions(s, args.questions, args.seed, "development")
            for s in ("tuning", "test")
        }
        counts = {(s, g): 0 for s in halves for g in GRID}
        for manual in dict.fromkeys(q.manual for qs in halves.values() for q in qs):
            tenant = ingest_manual(container, manual)
            for split, questions in halves.items():
                for question in (q for q in questions if q.manual == manual):
                    result = container.retriever.search(tenant, question.text, settings.top_k)
                    hits = result.hits if result.relevant else []
                    shown = gold_shown_by_limits(question.text, hits, gold[question.id], limits)
                    for variant, hit in shown.items():
                        counts[(split, variant)] += hit
            print(manual, flush=True)
    table = {
        f"{split} {passages} passages, focus {focus}": counts[(split, (passages, focus))]
        / len(halves[split])
        for split in halves
        for passages, focus in GRID
    }
    print("| half | passages | focus chars | gold shown |\n|---|---|---|---|")
    for split in halves:
        for passages, focus in GRID:
            share = counts[(split, (passages, focus))] / len(halves[split])
            print(f"| {split} | {passages} | {focus} | {share:.3f} |")
    out = RESULTS_DIR / "shown-gold-manuals-dev.json"
    out.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
