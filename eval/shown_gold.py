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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from app.config import load_settings
from app.container import Container
from app.domain import SearchHit
from app.generation.answer_limits import PassageLimits
from eval.manual_questions import GOLD_FILE, SPLITS, Split, ingest_manual
from eval.manual_sample import sample_manual_questions
from eval.metrics import cites_gold
from eval.retrieval import RESULTS_DIR

# (max passages, focus characters, passage characters in all): today's (3, 700, 3000), more
# passages, a larger focus budget, whole passages, a larger cap on the passages' characters
# (retrieval returns top_k = 5).
GRID = (
    (3, 700, 3000),
    (4, 700, 3000),
    (5, 700, 3000),
    (3, 1000, 3000),
    (5, 1000, 3000),
    (3, 0, 3000),
    (5, 700, 6000),
    (5, 1000, 6000),
    (5, 1400, 6000),
    (5, 0, 6000),
)


def gold_shown_by_limits(
    question: str,
    hits: Sequence[SearchHit],
    gold_pages: list[int],
    limits: PassageLimits,
    grid: Sequence[tuple[int, int, int]] = GRID,
) -> dict[tuple[int, int, int], bool]:
    """(max passages, focus characters, passage characters) -> whether the passages shown
    under `limits` changed to them hold a gold page."""
    shown = {}
    for passages, focus, chars in grid:
        variant = replace(limits, max_passages=passages, focus_chars=focus, max_passage_chars=chars)
        pages = [hit.chunk.page for hit in variant.shown(question, hits)]
        shown[(passages, focus, chars)] = cites_gold(pages, gold_pages)
    return shown


@dataclass(frozen=True)
class Retrieved:
    """One sampled question of a half, the hits the service retrieved for it, its gold pages."""

    split: Split
    question: str
    hits: list[SearchHit]
    gold_pages: list[int]


def retrieved_questions(count: int, seed: int) -> Iterator[Retrieved]:
    """The fixed-seed sample of both halves (`count` each), asked through the service's
    retriever manual by manual (the service's settings, the USE embedder)."""
    gold: dict[str, list[int]] = json.loads(GOLD_FILE.read_text(encoding="utf-8"))
    halves = {s: sample_manual_questions(s, count, seed, "development") for s in SPLITS}
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(
            _env_file=None, data_dir=Path(data), embedding_provider="use", env="development"
        )
        container = Container(settings)
        for manual in dict.fromkeys(q.manual for qs in halves.values() for q in qs):
            tenant = ingest_manual(container, manual)
            for split, questions in halves.items():
                for question in (q for q in questions if q.manual == manual):
                    result = container.retriever.search(tenant, question.text, settings.top_k)
                    hits = result.hits if result.relevant else []
                    yield Retrieved(split, question.text, hits, gold[question.id])
            print(manual, flush=True)


def service_limits() -> PassageLimits:
    """The passage limits the service reads from its `RAG_*` variables."""
    return PassageLimits.from_settings(load_settings(_env_file=None, env="development"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=45)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    limits = service_limits()
    counts = {(s, g): 0 for s in SPLITS for g in GRID}
    sizes = dict.fromkeys(SPLITS, 0)
    for item in retrieved_questions(args.questions, args.seed):
        sizes[item.split] += 1
        shown = gold_shown_by_limits(item.question, item.hits, item.gold_pages, limits)
        for variant, hit in shown.items():
            counts[(item.split, variant)] += hit
    table = {
        f"{split}: {passages} passages, focus {focus}, {chars} characters": counts[
            (split, (passages, focus, chars))
        ]
        / sizes[split]
        for split in SPLITS
        for passages, focus, chars in GRID
    }
    print("| half | passages | focus chars | passage chars | gold shown |\n|---|---|---|---|---|")
    for split in SPLITS:
        for variant in GRID:
            share = counts[(split, variant)] / sizes[split]
            print(f"| {split} | {' | '.join(map(str, variant))} | {share:.3f} |")
    out = RESULTS_DIR / "shown-gold-manuals-dev.json"
    out.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
