"""How much of each passage the model reads, per focus rule: crumbs and the gold page's share.

The focus cut (`app.generation.focus`) shares `RAG_LLM_FOCUS_CHARS` among the passages shown. A
passage can be shown as a few words ("… Tip", "5.10."): the model is shown the page but cannot
read it, while `gold_shown` still counts it. For the fixed-seed sample of both halves of the
development manuals (`eval.shown_gold`'s questions and retrieval), this counts per rule and
budget: passages shown per question, the share of them under `CRUMB_CHARS`, questions shown a
gold page, questions shown a gold page only as crumbs, the characters of gold text shown (median
over questions shown one) and the characters shown in all (median: the prompt's size). No model.

    python -m eval.focus_crumbs [--budgets 700] [--questions 45] [--seed 2026]
    python -m eval.focus_crumbs --recorded eval/results/answers-manuals-dev-test-llamacpp-t1.json

`--recorded` counts the same from answer files instead: the passages their model read.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import get_args

from app.generation.focus import FocusRule
from eval.shown_gold import retrieved_questions, service_limits

CRUMB_CHARS = 150


@dataclass
class CrumbCount:
    """What the model read over a set of questions."""

    questions: int = 0
    passages: int = 0
    crumbs: int = 0
    gold_shown: int = 0
    gold_only_crumbs: int = 0
    gold_chars: list[int] = field(default_factory=list)
    shown_chars: list[int] = field(default_factory=list)

    def add(self, texts: Sequence[str], pages: Sequence[int], gold_pages: Iterable[int]) -> None:
        """One question's shown passages (text and page) and its gold pages."""
        gold = [len(text) for text, page in zip(texts, pages, strict=True) if page in gold_pages]
        self.questions += 1
        self.passages += len(texts)
        self.crumbs += sum(len(text) < CRUMB_CHARS for text in texts)
        self.shown_chars.append(sum(map(len, texts)))
        if gold:
            self.gold_shown += 1
            self.gold_only_crumbs += max(gold) < CRUMB_CHARS
            self.gold_chars.append(sum(gold))

    def row(self) -> str:
        """A Markdown row's cells after the variant's name."""
        return (
            f"{self.passages / self.questions:.2f} | {self.crumbs / self.passages:.3f} "
            f"| {self.gold_shown / self.questions:.3f} | {self.gold_only_crumbs} "
            f"| {statistics.median(self.gold_chars or [0]):.0f} "
            f"| {statistics.median(self.shown_chars):.0f} |"
        )


HEADER = (
    "| {} | passages a question | under 150 chars | gold shown | gold only as crumbs "
    "| gold chars p50 | chars shown p50 |\n|---|---|---|---|---|---|---|"
)


def count_recorded(paths: Sequence[Path]) -> dict[str, CrumbCount]:
    """File name -> the counts of the passages its answers recorded."""
    counts = {}
    for path in paths:
        count = CrumbCount()
        for answer in json.loads(path.read_text(encoding="utf-8"))["answers"]:
            count.add(answer["shown_texts"], answer["shown_pages"], answer["gold_pages"])
        counts[path.name] = count
    return counts


def count_rules(
    budgets: Sequence[int], questions: int, seed: int
) -> dict[tuple[str, FocusRule, int], CrumbCount]:
    """(half, rule, budget) -> the counts of the passages the service's limits would show."""
    limits = service_limits()
    variants = [(rule, budget) for budget in budgets for rule in get_args(FocusRule)]
    counts: dict[tuple[str, FocusRule, int], CrumbCount] = {}
    for item in retrieved_questions(questions, seed):
        for rule, budget in variants:
            shown = replace(limits, focus_rule=rule, focus_chars=budget).shown(
                item.question, item.hits
            )
            counts.setdefault((item.split, rule, budget), CrumbCount()).add(
                [hit.chunk.text for hit in shown],
                [hit.chunk.page for hit in shown],
                item.gold_pages,
            )
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--budgets", type=int, nargs="+", default=[service_limits().focus_chars])
    parser.add_argument("--questions", type=int, default=45)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--recorded", type=Path, nargs="+", help="answer files to count instead")
    args = parser.parse_args()
    if args.recorded:
        print(HEADER.format("answers"))
        for name, count in count_recorded(args.recorded).items():
            print(f"| {name} | {count.row()}")
        return
    counts = count_rules(args.budgets, args.questions, args.seed)
    print(HEADER.format("half | rule | budget").replace("|---|", "|---|---|---|", 1))
    for (split, rule, budget), count in sorted(counts.items()):
        print(f"| {split} | {rule} | {budget} | {count.row()}")


if __name__ == "__main__":
    main()
