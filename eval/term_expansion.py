"""The local LLM names the manual's own term for a question, and the question is searched with it.

Natural questions miss their page when they word a feature in everyday language and the manual
names it by its jargon ("send everything R prints to a file" for `sink`). Here the default local
model is asked, once per question, for the exact function, command, option or setting name (the
document's file name is all it is told about the manual, as the service would know it), and the
shipped hybrid ranks pages for the question with that name appended. Scored by page against the
question alone, per manual, on every development manual and the held-out one, three ways: the
named question's order (`named`), both orders fused by reciprocal rank (`fused`), and the named
question's order only when the name stands in the manual's text (`named-if-in-text`):

    python -m eval.term_expansion [--manuals R-intro xfig ...] [--data DIR]

Each manual is indexed once into `--data` (kept between runs) and the model's names are cached
in `eval/.cache/term-expansion-names.json` (keyed by the prompt and the question), so a rerun
only searches. Writes `eval/results/term-expansion.json`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.config import load_settings
from app.container import Container
from eval.manual_questions import (
    HELD_OUT_SOURCES,
    KNOWN_SOURCES,
    ManualQuestion,
    content_pages,
    ingest_manual,
    load_questions,
    missing_sources,
    resolve_gold,
)
from eval.metrics import ranking_scores
from eval.query_steps import _chat, _local_llm
from eval.retrieval import RESULTS_DIR, git_commit

CACHE = Path(__file__).resolve().parent / ".cache"
NAMING = (
    "A user asks a question about a software manual. Reply with the exact name of the function, "
    "command, option or setting that does it, as it is written in the software, and nothing "
    "else. Example: Manual: Git user manual. Question: How do I undo my last commit but keep the "
    "changes? Reply: git reset --soft HEAD~1"
)
NAME_TOKENS = 16
METRICS = ("hit@1", "hit@5", "mrr@10")


class Namer:
    """The local model's name for a question's feature, cached on disk."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._names: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
        self._llm: Any = None
        self.seconds: list[float] = []

    def name(self, manual_file: str, question: str) -> str:
        prompt = f"Manual: {manual_file}\nQuestion: {question}"
        key = hashlib.sha256(f"{NAMING}\n{prompt}".encode()).hexdigest()
        if key not in self._names:
            if self._llm is None:
                self._llm = _local_llm(load_settings(_env_file=None))
            started = time.perf_counter()
            self._names[key] = _chat(self._llm, NAMING, prompt, NAME_TOKENS).strip()
            self.seconds.append(time.perf_counter() - started)
            self._path.write_text(json.dumps(self._names, ensure_ascii=False, indent=0))
        return self._names[key]


def page_ranking(container: Container, tenant: str, query: str) -> list[str]:
    """Pages in the shipped order (today's defaults), each once, from the top 30 chunks."""
    result = container.retriever.search(tenant, query, 30, "hybrid")
    return list(dict.fromkeys(str(hit.chunk.page) for hit in result.hits))


def fused(first: list[str], second: list[str], k: int = 10) -> list[str]:
    """Two page rankings fused by reciprocal rank, equal weights."""
    score: dict[str, float] = {}
    for ranking in (first, second):
        for rank, page in enumerate(ranking, start=1):
            score[page] = score.get(page, 0.0) + 1 / (k + rank)
    return sorted(score, key=lambda page: -score[page])


def in_text(name: str, text: str) -> bool:
    """Whether the model's name (its first line, quotes and a call's "()" aside) stands in the
    manual's text, case and runs of white space aside: a name the manual really uses."""
    lines = name.strip().strip("`'\"").splitlines()
    cleaned = re.sub(r"\(\)$", "", lines[0] if lines else "").lower()
    return len(cleaned) >= 3 and cleaned in text


# How each variant orders a question's pages: (pages for the question alone, pages for the
# question with the name appended, whether the name stands in the manual).
VARIANTS: dict[str, Callable[[list[str], list[str], bool], list[str]]] = {
    "alone": lambda alone, named, found: alone,
    "named": lambda alone, named, found: named,
    "fused": lambda alone, named, found: fused(alone, named),
    "named-if-in-text": lambda alone, named, found: named if found else alone,
}


def manual_text(manual: str) -> str:
    """The manual's content pages, lower-cased, white space folded."""
    pages = content_pages(KNOWN_SOURCES[manual].path)
    return re.sub(r"\s+", " ", " ".join(pages.values())).lower()


def indexed(container: Container, manual: str) -> str:
    """The manual's tenant, indexed unless it already is (the data folder is kept)."""
    tenant = "manual-" + manual.lower()
    if container.corpus.count(tenant) == 0:
        ingest_manual(container, manual)
    return tenant


def score_manual(
    container: Container, namer: Namer, manual: str, questions: list[ManualQuestion]
) -> dict[str, Any]:
    """Each variant's mean hit@1 / hit@5 / MRR@10 on the manual, and every question's name and
    top pages."""
    gold = resolve_gold(questions)
    tenant = indexed(container, manual)
    text = manual_text(manual)
    rows: list[dict[str, Any]] = []
    for question in questions:
        wanted = {str(page) for page in gold[question.id]}
        name = namer.name(KNOWN_SOURCES[manual].name, question.text)
        alone = page_ranking(container, tenant, question.text)
        named = page_ranking(container, tenant, f"{question.text} {name}")
        found = in_text(name, text)
        scores = {
            variant: ranking_scores(order(alone, named, found)[:10], wanted)
            for variant, order in VARIANTS.items()
        }
        rows.append(
            {
                "id": question.id,
                "name": name,
                "in_text": found,
                "gold": sorted(wanted),
                "alone": alone[:10],
                "named": named[:10],
                "scores": scores,
            }
        )
    means = {
        variant: {
            metric: statistics.fmean(row["scores"][variant][metric] for row in rows)
            for metric in METRICS
        }
        for variant in VARIANTS
    }
    return {"n": len(rows), "means": means, "questions": rows}


def print_table(manuals: dict[str, Any]) -> None:
    """Per manual: each variant's hit@1 / hit@5 / MRR@10 and its MRR change; the development
    mean and the manuals losing more than 0.02 MRR."""
    print("| manual | n | " + " | ".join(VARIANTS) + " |")
    print("|---|---|" + "---|" * len(VARIANTS))
    for manual, result in manuals.items():
        base = result["means"]["alone"]["mrr@10"]
        cells = []
        for variant in VARIANTS:
            mean = result["means"][variant]
            cell = " / ".join(f"{mean[m]:.3f}" for m in METRICS)
            if variant != "alone":
                cell += f" ({mean['mrr@10'] - base:+.3f})"
            cells.append(cell)
        held = " (held out)" if manual in HELD_OUT_SOURCES else ""
        print(f"| {manual}{held} | {result['n']} | " + " | ".join(cells) + " |")
    development = [m for m in manuals if m not in HELD_OUT_SOURCES]
    if not development:
        return
    for variant in VARIANTS:
        mean = {
            m: statistics.fmean(manuals[d]["means"][variant][m] for d in development)
            for m in METRICS
        }
        losers = [
            d
            for d in development
            if manuals[d]["means"][variant]["mrr@10"] - manuals[d]["means"]["alone"]["mrr@10"]
            < -0.02
        ]
        print(
            f"{variant}: development mean "
            + " / ".join(f"{mean[m]:.3f}" for m in METRICS)
            + f"; losing more than 0.02 MRR: {', '.join(losers) or 'none'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--manuals", nargs="*", default=list(KNOWN_SOURCES))
    parser.add_argument("--data", type=Path, default=CACHE / "term-expansion-data")
    args = parser.parse_args()
    absent = {source.name for source in missing_sources(KNOWN_SOURCES)}
    settings = load_settings(_env_file=None, data_dir=args.data)
    container = Container(settings)
    CACHE.mkdir(exist_ok=True)
    namer = Namer(CACHE / "term-expansion-names.json")
    questions = load_questions(sources=KNOWN_SOURCES)
    report: dict[str, Any] = {"commit": git_commit(), "naming": NAMING, "manuals": {}}
    for manual in args.manuals:
        if KNOWN_SOURCES[manual].name in absent:
            print(f"SKIPPED {manual}: its package is not installed")
            continue
        mine = [q for q in questions if q.manual == manual]
        report["manuals"][manual] = score_manual(container, namer, manual, mine)
    print_table(report["manuals"])
    if namer.seconds:
        print(f"naming: median {statistics.median(namer.seconds):.2f} s a question")
    out = RESULTS_DIR / "term-expansion.json"
    out.write_text(json.dumps(report, ensure_ascii=False))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
