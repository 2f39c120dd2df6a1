"""The cost of the second dense arm (RAG_SECOND_EMBEDDING=e5): ingest chunks/s through the
service pipeline and the per-stage time of a search, with the option off and on, in one process
over the same paragraphs and questions.

    python -m bench.second_arm [--paragraphs 60] [--questions 60] [--task xquad-ar-ar]

Needs the eval data (RAG_EVAL_DATA_DIR). Each side gets its own data directory and container,
warmed up first (models loaded), so ingest time is parse + embed (+ embed_second) + store. The
search stages are the service's own timers (`embed_query`, `dense`, `embed_query_second`,
`dense_second`, `keyword`, `fuse`), medians over the questions.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from app.config import load_settings
from app.container import Container
from app.timing import start_timer
from bench.common import median, table
from eval.datasets import load_task
from eval.retrieval import ingest_paragraphs

STAGES = ("embed_query", "dense", "embed_query_second", "dense_second", "keyword", "fuse")


def measure(
    root: Path, second: str, paragraphs: dict[str, str], questions: list[str]
) -> list[object]:
    """One table row: option, chunks, ingest s, chunks/s, median ms of each stage, load."""
    settings = load_settings(
        _env_file=None,
        data_dir=root / second,
        embedding_provider="use",
        second_embedding=second,
    )
    container = Container(settings)
    container.warm_up(serving=False)
    started = time.perf_counter()
    ingest_paragraphs(container, "bench", paragraphs, root / f"files-{second}")
    seconds = time.perf_counter() - started
    chunks = container.corpus.count("bench")
    stages: dict[str, list[float]] = {}
    for question in questions:
        timer = start_timer()
        container.retriever.search("bench", question, 10)
        for name, ms in timer.stages.items():
            stages.setdefault(name, []).append(ms)
    per_stage = [f"{median(stages[s]):.1f}" if s in stages else "-" for s in STAGES]
    load = f"{os.getloadavg()[0]:.1f}"
    return [second, chunks, f"{seconds:.1f}", f"{chunks / seconds:.1f}", *per_stage, load]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--paragraphs", type=int, default=60)
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--task", default="xquad-ar-ar")
    args = parser.parse_args()
    task = load_task(args.task)
    paragraphs = dict(list(task.paragraphs.items())[: args.paragraphs])
    questions = [q.text for q in task.questions[: args.questions]]
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(Path(tmp), second, paragraphs, questions) for second in ("none", "e5")]
    headers = ["second arm", "chunks", "ingest s", "chunks/s", *[f"{s} ms" for s in STAGES]]
    print(table([*headers, "load avg"], rows))


if __name__ == "__main__":
    main()
