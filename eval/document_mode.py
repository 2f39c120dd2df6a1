"""`/search` by chunk or by document: what each returns at k=10, scored both ways.

Each XQuAD / ARCD corpus is ingested as eval/retrieval.py does (a paragraph per document), every
question is searched with k=10 in both groupings through the retriever `/search` calls, and the
10 results are scored twice:

- document level: the results' documents against the gold paragraph's (a document that takes
  several places in chunk mode counts once, at its first place: the places it takes are lost);
- chunk level: the results' chunks against the gold paragraph's chunks holding a gold answer
  (all its chunks when the answer straddles two).

The manual questions (one manual per tenant, so one document) are scored by page: the pages of
the 10 results and, by document, also the result's `other_pages` as /search returns them.

    python -m eval.document_mode [--tasks ...] [--limit N] [--no-manuals]

Prints a table and writes eval/results/document-mode-<provider>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.config import Settings, load_settings
from app.container import Container
from app.domain import RetrievalResult
from app.retrieval.grouping import GROUPINGS
from eval.datasets import TASKS, Question, load_task
from eval.manual_questions import SOURCES, ingest_manual, load_questions, missing_sources
from eval.manual_questions import resolve_gold as manual_gold
from eval.metrics import ndcg_at_k, recall_at_k
from eval.retrieval import CORPUS_OF_TASK, RESULTS_DIR, ingest_paragraphs, run_header

K = 10
Ranker = Callable[[RetrievalResult], list[str]]


def answer_chunks(container: Container, tenant: str, doc_map: dict[str, str]) -> Any:
    """question -> ids of the gold paragraph's chunks holding one of its answers."""
    by_paragraph: dict[str, list[tuple[str, str]]] = {}
    for chunk in container.corpus.iter_chunks(tenant):
        paragraph = doc_map[chunk.document_id]
        by_paragraph.setdefault(paragraph, []).append((chunk.id, chunk.text.casefold()))

    def gold(question: Question) -> set[str]:
        chunks = [c for p in question.gold for c in by_paragraph.get(p, [])]
        answers = [a.casefold() for a in question.answers if a.strip()]
        holding = {cid for cid, text in chunks if any(a in text for a in answers)}
        return holding or {cid for cid, _ in chunks}

    return gold


def score(rankings: list[list[str]], golds: list[set[str]]) -> dict[str, float]:
    """Mean recall@10 and nDCG@10."""
    return {
        "recall@10": statistics.fmean(
            recall_at_k(r, g, K) for r, g in zip(rankings, golds, strict=True)
        ),
        "ndcg@10": statistics.fmean(
            ndcg_at_k(r, g, K) for r, g in zip(rankings, golds, strict=True)
        ),
    }


def evaluate_task(
    container: Container, name: str, tenant: str, doc_map: dict[str, str], limit: int | None
) -> dict[str, Any]:
    """Both groupings on one task: chunk- and document-level metrics, ms per query."""
    task = load_task(name)
    questions = task.questions[:limit] if limit else task.questions
    gold_chunks = answer_chunks(container, tenant, doc_map)
    out: dict[str, Any] = {}
    for group in GROUPINGS:
        docs, chunks, ms = [], [], []
        for question in questions:
            started = time.perf_counter()
            result = container.retriever.search(tenant, question.text, K, group=group)  # type: ignore[arg-type]
            ms.append((time.perf_counter() - started) * 1000)
            docs.append([doc_map[h.chunk.document_id] for h in result.hits])
            chunks.append([h.chunk.id for h in result.hits])
        out[group] = {
            "document": score(docs, [set(q.gold) for q in questions]),
            "chunk": score(chunks, [gold_chunks(q) for q in questions]),
            "distinct_documents": statistics.fmean(len(set(d)) for d in docs),
            "p50_ms": statistics.median(ms),
            "questions": len(questions),
        }
    return out


def page_rankings(result: RetrievalResult, with_other_pages: bool) -> list[str]:
    """The results' pages in rank order (and each result's other ranked pages after its own)."""
    pages: list[int] = []
    for hit in result.hits:
        pages.append(hit.chunk.page)
        if with_other_pages:
            pages += [c.page for c in hit.same_document]
    return [str(p) for p in pages]


def evaluate_manuals(container: Container, folder: Path) -> dict[str, Any]:
    """Page-level recall@10 / nDCG@10 of the manual questions, per grouping."""
    missing = {s.name for s in missing_sources()}
    questions = load_questions()
    variants: dict[str, tuple[str, bool]] = {
        "chunk": ("chunk", False),
        "document": ("document", False),
        "document + other_pages": ("document", True),
    }
    rankings: dict[str, list[list[str]]] = {v: [] for v in variants}
    golds: list[set[str]] = []
    folder.mkdir(parents=True, exist_ok=True)
    for manual, source in SOURCES.items():
        if source.name in missing:
            print(f"SKIPPED {source.name}: not installed")
            continue
        mine = [q for q in questions if q.manual == manual]
        gold = manual_gold(mine)
        path = folder / source.name
        path.write_bytes(source.path.read_bytes())
        tenant = ingest_manual(container, manual, path)
        for question in mine:
            golds.append({str(p) for p in gold[question.id]})
            results = {
                g: container.retriever.search(tenant, question.text, K, group=g)  # type: ignore[arg-type]
                for g in GROUPINGS
            }
            for variant, (group, others) in variants.items():
                rankings[variant].append(page_rankings(results[group], others))
    if not golds:
        return {"skipped": "no manual installed"}
    return {"questions": len(golds), **{v: score(rankings[v], golds) for v in variants}}


def print_table(report: dict[str, Any]) -> None:
    """Markdown: one row per task and grouping."""
    print(
        "| task | group | doc recall@10 | doc nDCG@10 | chunk recall@10 | chunk nDCG@10 "
        "| distinct docs | p50 ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for task, groups in report["tasks"].items():
        for group, r in groups.items():
            d, c = r["document"], r["chunk"]
            print(
                f"| {task} | {group} | {d['recall@10']:.3f} | {d['ndcg@10']:.3f} | "
                f"{c['recall@10']:.3f} | {c['ndcg@10']:.3f} | {r['distinct_documents']:.2f} | "
                f"{r['p50_ms']:.1f} |"
            )
    manuals = report.get("manuals", {})
    if "questions" in manuals:
        print(f"\nManual questions ({manuals['questions']}), page level:\n")
        print("| variant | page recall@10 | page nDCG@10 |")
        print("|---|---|---|")
        for variant, r in manuals.items():
            if isinstance(r, dict):
                print(f"| {variant} | {r['recall@10']:.3f} | {r['ndcg@10']:.3f} |")


def run(settings: Settings, tasks: list[str], limit: int | None, manuals: bool) -> dict[str, Any]:
    """Ingest, search both ways, score."""
    container = Container(settings)
    report: dict[str, Any] = {**run_header(settings, container), "k": K, "tasks": {}}
    corpora: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in tasks:
            tenant = CORPUS_OF_TASK[name]
            if tenant not in corpora:
                paragraphs = load_task(name).paragraphs
                corpora[tenant] = ingest_paragraphs(
                    container, tenant, paragraphs, Path(tmp) / tenant
                )
            report["tasks"][name] = evaluate_task(container, name, tenant, corpora[tenant], limit)
            print(f"done {name}", flush=True)
        if manuals:
            report["manuals"] = evaluate_manuals(container, Path(tmp) / "manuals")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--provider", default="use", help="embedding provider (use, e5, ...)")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--limit", type=int, default=None, help="questions per task")
    parser.add_argument("--no-manuals", action="store_true", help="skip the manual questions")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(
            _env_file=None, data_dir=Path(data), embedding_provider=args.provider, env="development"
        )
        report = run(settings, args.tasks, args.limit, not args.no_manuals)
    print_table(report)
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"document-mode-{args.provider}.json"
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
