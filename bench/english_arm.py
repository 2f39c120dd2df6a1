"""The cost of the English arm (RAG_ENGLISH_EMBEDDING=minilm): ingest chunks/s through the
service pipeline, the Chroma disk per chunk, the per-stage time and p50 / p95 of a search, and a
new process's first search and memory, with the option off and on over the same paragraphs and
questions.

    python -m bench.english_arm [--paragraphs 120] [--questions 100] [--task xquad-en-en]

Needs the eval data (RAG_EVAL_DATA_DIR). Each side gets its own data directory and container,
warmed up first (models loaded, the passage child started), so ingest time is parse + embed
(+ embed_english) + store. The search stages are the service's own timers, medians over the
questions. The first search after a start runs in a new process on a copy of the data directory
just written (`--first-search`): the time to build the service and answer one question (models
loaded on the way, as a process that skipped the warm-up would), and its resident memory after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.config import load_settings
from app.container import Container
from app.timing import start_timer
from bench.common import median, table
from eval.datasets import load_task
from eval.retrieval import ingest_paragraphs

STAGES = ("embed_query", "dense", "embed_query_english", "dense_english", "keyword", "fuse")


def _settings(data_dir: Path, english: str) -> object:
    return load_settings(
        _env_file=None, data_dir=data_dir, embedding_provider="use", english_embedding=english
    )


def _disk_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def measure(
    root: Path, english: str, paragraphs: dict[str, str], questions: list[str]
) -> list[object]:
    """One table row: option, chunks, ingest s, chunks/s, disk KB per chunk, median ms of each
    stage, search p50 / p95, first search in a new process, its memory, load."""
    settings = _settings(root / english, english)
    container = Container(settings)  # type: ignore[arg-type]
    container.warm_up(serving=False)
    started = time.perf_counter()
    ingest_paragraphs(container, "bench", paragraphs, root / f"files-{english}")
    seconds = time.perf_counter() - started
    chunks = container.corpus.count("bench")
    stages: dict[str, list[float]] = {}
    totals: list[float] = []
    container.retriever.search("bench", questions[0], 10)  # models loaded for questions
    for question in questions:
        timer = start_timer()
        begun = time.perf_counter()
        container.retriever.search("bench", question, 10)
        totals.append((time.perf_counter() - begun) * 1000)
        for name, ms in timer.stages.items():
            stages.setdefault(name, []).append(ms)
    per_stage = [f"{median(stages[s]):.1f}" if s in stages else "-" for s in STAGES]
    totals.sort()
    p95 = totals[min(len(totals) - 1, round(0.95 * (len(totals) - 1)))]
    disk = _disk_mb(root / english / "chroma") * 1000 / max(chunks, 1)
    # A copy of the data directory: this process keeps its lock on the embedded Chroma one.
    restart = root / f"{english}-restarted"
    shutil.copytree(root / english, restart)
    first = json.loads(
        subprocess.run(
            [
                *(sys.executable, "-m", "bench.english_arm", "--first-search", str(restart)),
                *("--option", english, "--question", questions[0]),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    return [
        english,
        chunks,
        f"{seconds:.1f}",
        f"{chunks / seconds:.1f}",
        f"{disk:.1f}",
        *per_stage,
        f"{median(totals):.1f} / {p95:.1f}",
        f"{first['first_search_s']:.2f}",
        f"{first['rss_mb']:.0f}",
        f"{os.getloadavg()[0]:.1f}",
    ]


def first_search(data_dir: Path, english: str, question: str) -> None:
    """In a new process: build the service on `data_dir` and answer one question; print the
    seconds it took and the resident memory after (JSON)."""
    started = time.perf_counter()
    container = Container(_settings(data_dir, english))  # type: ignore[arg-type]
    container.retriever.search("bench", question, 10)
    seconds = time.perf_counter() - started
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"first_search_s": seconds, "rss_mb": rss_mb}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--paragraphs", type=int, default=120)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--task", default="xquad-en-en")
    parser.add_argument("--first-search", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--option", default="none", help=argparse.SUPPRESS)
    parser.add_argument("--question", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_search is not None:
        first_search(args.first_search, args.option, args.question)
        return
    task = load_task(args.task)
    paragraphs = dict(list(task.paragraphs.items())[: args.paragraphs])
    questions = [q.text for q in task.questions if q.gold & set(paragraphs)][: args.questions]
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(Path(tmp), option, paragraphs, questions) for option in ("none", "minilm")]
    headers = [
        "English arm",
        "chunks",
        "ingest s",
        "chunks/s",
        "Chroma KB/chunk",
        *[f"{s} ms" for s in STAGES],
        "search p50 / p95 ms",
        "new process: first search s",
        "its max RSS MB",
        "load avg",
    ]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
