"""`/search` by chunk vs. by document (`group=document`): the latency of the same queries.

The corpus and questions are bench.retrieval's (real XQuAD sentences recombined into chunks, real
`use` vectors for a pool plus noise), stored as documents of `--doc-chunks` chunks each. Grouping
loads every candidate to learn its document, and widens the arms while the candidates hold fewer
than k documents; documents of 1000 chunks in a 2000-chunk tenant are its worst case (a second,
wider pass on every query). The two groupings alternate in rounds, in one process. Besides the
totals, the table shows the stages grouping changes ("keyword" holds the loading of candidates,
"fuse" the ordering and grouping), which machine noise moves much less than the totals.

    python -m bench.grouping [--chunks 2000] [--doc-chunks 1000,100,10] [--queries 60] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from app.config import load_settings
from app.providers.embeddings import build_embedder
from app.retrieval.grouping import GROUPINGS, Grouping
from app.retrieval.hybrid import HybridRetriever, build_retriever
from app.timing import start_timer
from bench.bm25_libraries import synthetic_chunks
from bench.common import median, percentile, table
from bench.retrieval import TENANT, _load, sample_questions
from testkit.indexing import build_corpus

K = 5


def _run(
    retriever: HybridRetriever, questions: list[str], group: Grouping
) -> tuple[list[float], list[float], list[int]]:
    """ms per query, ms of the stages grouping changes, and the documents each returned."""
    totals, changed, documents = [], [], []
    for question in questions:
        timer = start_timer()
        result = retriever.search(TENANT, question, K, mode="hybrid", group=group)
        totals.append(timer.total_ms())
        # "keyword" holds the loading of candidates' chunks, "fuse" the ordering and grouping.
        changed.append(sum(timer.stages.get(stage, 0.0) for stage in ("keyword", "fuse")))
        documents.append(len({hit.chunk.document_id for hit in result.hits}))
    return totals, changed, documents


def measure(chunks: int, doc_chunks: int, questions: list[str], rounds: int) -> list[object]:
    """One row: both groupings on a tenant of `chunks` chunks in documents of `doc_chunks`."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(_env_file=None, data_dir=Path(tmp), embedding_provider="use")
        embedder = build_embedder(settings)
        store = build_corpus(settings, embedder)
        _load(store, embedder, synthetic_chunks(chunks), doc_size=doc_chunks)
        retriever = build_retriever(settings, embedder, store, reranker=None)
        retriever.refresh(TENANT)
        retriever.search(TENANT, questions[0], K, mode="hybrid")  # warm caches
        times: dict[str, list[float]] = {group: [] for group in GROUPINGS}
        stages: dict[str, list[float]] = {group: [] for group in GROUPINGS}
        docs: dict[str, list[int]] = {group: [] for group in GROUPINGS}
        for _ in range(rounds):
            for group in GROUPINGS:
                ms, changed, found = _run(retriever, questions, group)  # type: ignore[arg-type]
                times[group] += ms
                stages[group] += changed
                docs[group] += found
    chunk, document = times["chunk"], times["document"]
    return [
        doc_chunks,
        -(-chunks // doc_chunks),
        round(median(chunk), 1),
        round(percentile(chunk, 95), 1),
        round(median(document), 1),
        round(percentile(document, 95), 1),
        f"{median(document) / median(chunk):.2f}",
        round(median(stages["chunk"]), 2),
        round(median(stages["document"]), 2),
        round(statistics.fmean(docs["chunk"]), 2),
        round(statistics.fmean(docs["document"]), 2),
    ]


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--doc-chunks", default="1000,100,10")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    questions = sample_questions(args.queries)
    rows = []
    for doc_chunks in (int(n) for n in args.doc_chunks.split(",")):
        rows.append(measure(args.chunks, doc_chunks, questions, args.rounds))
        print(f"done {doc_chunks}: {rows[-1]}", flush=True)
    headers = [
        "chunks per document",
        "documents",
        "by chunk p50 ms",
        "by chunk p95 ms",
        "by document p50 ms",
        "by document p95 ms",
        "p50 ratio",
        "keyword+fuse p50 by chunk",
        "by document",
        f"documents in top {K} by chunk",
        "by document",
    ]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
