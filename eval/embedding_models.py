"""Compare the offline embedding models on dense retrieval: quality and speed, one run.

For each model and task: nDCG@10, hit@1, hit@5, MRR of exact (brute-force) cosine search over the
task's paragraphs, plus paragraphs/s to embed the corpus and ms per query embedding. Exact search
isolates the embedder: the vector store's ANN index is not what is being compared.

    .venv/bin/python -m eval.embedding_models [--models use e5] [--tasks ...] [--limit N]

Prints a markdown table and writes JSON to eval/results/embedding_models.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from app.config import load_settings
from app.providers.embeddings import build_embedder
from app.providers.types import Embedder
from eval.datasets import TASKS, RetrievalTask, load_task
from eval.metrics import summarize

RESULTS = Path(__file__).resolve().parent / "results" / "embedding_models.json"


@dataclass
class CorpusEmbedding:
    """Paragraph vectors of one corpus, and how long they took."""

    ids: list[str]
    matrix: np.ndarray
    passages_per_s: float
    mean_chars: float


def embed_corpus(embedder: Embedder, paragraphs: dict[str, str]) -> CorpusEmbedding:
    """Embed every paragraph in one call (the embedder batches), timing the whole."""
    ids, texts = list(paragraphs), list(paragraphs.values())
    started = time.perf_counter()
    matrix = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    elapsed = time.perf_counter() - started
    return CorpusEmbedding(
        ids, matrix, len(texts) / elapsed, statistics.fmean(len(t) for t in texts)
    )


def embed_queries(embedder: Embedder, texts: list[str]) -> tuple[np.ndarray, list[float]]:
    """One embed_query call per question, as a live service makes them; ms per call."""
    vectors, timings = [], []
    for text in texts:
        started = time.perf_counter()
        vectors.append(embedder.embed_query(text))
        timings.append((time.perf_counter() - started) * 1000.0)
    return np.asarray(vectors, dtype=np.float32), timings


def evaluate_model(provider: str, tasks: list[RetrievalTask], threads: int) -> list[dict[str, Any]]:
    """Metrics and speed of one embedding provider on each task."""
    settings = load_settings(_env_file=None, embedding_provider=provider, embedding_threads=threads)
    embedder = build_embedder(settings)
    corpora: dict[tuple[str, ...], CorpusEmbedding] = {}
    queries: dict[tuple[str, ...], tuple[np.ndarray, list[float]]] = {}
    rows = []
    for task in tasks:
        # ar->en reuses the English corpus of en->en and the Arabic questions of ar->ar.
        corpus_key = tuple(task.paragraphs)
        if corpus_key not in corpora:
            corpora[corpus_key] = embed_corpus(embedder, task.paragraphs)
        corpus = corpora[corpus_key]
        texts = [q.text for q in task.questions]
        query_key = tuple(texts)
        if query_key not in queries:
            queries[query_key] = embed_queries(embedder, texts)
        query_matrix, timings = queries[query_key]
        scores = query_matrix @ corpus.matrix.T
        order = np.argsort(-scores, axis=1, kind="stable")
        rankings = [[corpus.ids[i] for i in row] for row in order]
        metrics = summarize(rankings, [q.gold for q in task.questions])
        rows.append(
            {
                "model": provider,
                "model_id": embedder.model_id,
                "dimension": embedder.dimension,
                "threads": threads,
                "task": task.name,
                "paragraphs": len(corpus.ids),
                "questions": len(task.questions),
                **{name: round(value, 4) for name, value in metrics.items()},
                "passages_per_s": round(corpus.passages_per_s, 1),
                "mean_paragraph_chars": round(corpus.mean_chars),
                "query_ms_median": round(statistics.median(timings), 2),
                "query_ms_p95": round(float(np.percentile(timings, 95)), 2),
            }
        )
        print(f"  {provider:>4} {task.name:<12} nDCG@10 {metrics['ndcg@10']:.3f}", flush=True)
    return rows


def limit_task(task: RetrievalTask, limit: int | None) -> RetrievalTask:
    """The first `limit` questions (all paragraphs stay: the corpus is what makes it hard)."""
    if limit is None:
        return task
    return RetrievalTask(task.name, task.paragraphs, task.questions[:limit])


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The results as a markdown table, one row per model and task."""
    header = (
        "| model | task | nDCG@10 | hit@1 | hit@5 | MRR | paragraphs/s (mean chars) "
        "| ms/query (median, p95) |\n|---|---|---|---|---|---|---|---|"
    )
    lines = [
        f"| {r['model']} | {r['task']} | {r['ndcg@10']:.3f} | {r['hit@1']:.3f} | {r['hit@5']:.3f} "
        f"| {r['mrr']:.3f} | {r['passages_per_s']:.1f} ({r['mean_paragraph_chars']}) "
        f"| {r['query_ms_median']:.1f}, {r['query_ms_p95']:.1f} |"
        for r in rows
    ]
    return "\n".join([header, *lines])


def main(argv: list[str] | None = None) -> None:
    """Run the comparison, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["use", "e5"])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--limit", type=int, default=None, help="questions per task (smoke runs)")
    parser.add_argument("--threads", type=int, default=load_settings().embedding_threads)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    tasks = [limit_task(load_task(name), args.limit) for name in args.tasks]
    load_before = os.getloadavg()
    started = time.perf_counter()
    rows = [
        row for provider in args.models for row in evaluate_model(provider, tasks, args.threads)
    ]
    table = markdown_table(rows)
    print(table)
    report = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python -m eval.embedding_models", *(argv or sys.argv[1:])]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        },
        "seconds": round(time.perf_counter() - started, 1),
        "search": "exact cosine (brute force) over all paragraphs of the task",
        "rows": rows,
        "table": table,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
