"""rank-bm25 vs. bm25s: build time, query latency at 10k/100k chunks, and quality on real data.

Both get the same tokens from app.text.tokenizer. The corpus is made of real XQuAD
sentences (English and Arabic) recombined into chunks of ~120 words.

    python -m bench.bm25_libraries [--sizes 10000,100000] [--queries 50]
"""

from __future__ import annotations

import argparse
import math
import random
import re
import time

import bm25s
import numpy as np
from rank_bm25 import BM25Okapi

from app.text.tokenizer import tokenize
from bench.common import median, percentile, table
from bench.tokenizer_ablation import datasets


def synthetic_chunks(count: int, seed: int = 7) -> list[str]:
    """Chunks of ~120 words stitched from real sentences."""
    sentences = [
        s
        for ds in datasets()
        for p in ds.paragraphs
        for s in re.split(r"(?<=[.!?؟])\s+", p)
        if len(s) > 20
    ]
    rng = random.Random(seed)
    return [" ".join(rng.sample(sentences, 5)) for _ in range(count)]


def _ndcg(scores_for: object, ds_questions: list[tuple[str, int]]) -> float:
    total = 0.0
    for question, gold in ds_questions:
        scores = scores_for(tokenize(question))  # type: ignore[operator]
        rank = int((scores >= scores[gold]).sum())
        total += 1.0 / math.log2(rank + 1) if rank <= 10 else 0.0
    return total / len(ds_questions)


def _bm25s_scores(index: bm25s.BM25, n: int):  # type: ignore[no-untyped-def]
    def scores(tokens: list[str]) -> np.ndarray:
        ids = index.get_tokens_ids(tokens)
        return index.get_scores_from_ids(ids) if ids else np.zeros(n)

    return scores


def quality() -> list[list[object]]:
    """nDCG@10 of both libraries on XQuAD en/ar and ARCD (same tokens, same k1/b)."""
    rows = []
    for ds in datasets():
        tokens = [tokenize(p) or [""] for p in ds.paragraphs]
        fast = bm25s.BM25(k1=1.2, b=0.75)
        fast.index(tokens, show_progress=False)
        okapi = BM25Okapi(tokens, k1=1.2, b=0.75)
        rows.append(
            [
                ds.name,
                round(_ndcg(okapi.get_scores, ds.questions), 4),
                round(_ndcg(_bm25s_scores(fast, len(tokens)), ds.questions), 4),
            ]
        )
    return rows


def speed(size: int, queries: list[str]) -> list[object]:
    """Build seconds and query p50/p95 (ms, top-30) for both libraries at one size."""
    tokens = [tokenize(c) for c in synthetic_chunks(size)]
    t0 = time.perf_counter()
    okapi = BM25Okapi(tokens, k1=1.2, b=0.75)
    okapi_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    fast = bm25s.BM25(k1=1.2, b=0.75)
    fast.index(tokens, show_progress=False)
    fast_build = time.perf_counter() - t0

    def lat(fn) -> list[float]:  # type: ignore[no-untyped-def]
        out = []
        for q in queries:
            t = time.perf_counter()
            scores = fn(tokenize(q))
            np.argpartition(-scores, 30)[:30]
            out.append((time.perf_counter() - t) * 1000)
        return out

    okapi_ms = lat(okapi.get_scores)
    fast_ms = lat(_bm25s_scores(fast, size))
    return [
        size,
        round(okapi_build, 2),
        round(fast_build, 2),
        round(median(okapi_ms), 2),
        round(percentile(okapi_ms, 95), 2),
        round(median(fast_ms), 3),
        round(percentile(fast_ms, 95), 3),
        round(median(okapi_ms) / median(fast_ms), 1),
    ]


def main() -> None:
    """Print the quality and the speed table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    print(table(["dataset", "rank-bm25 nDCG@10", "bm25s nDCG@10"], quality()))
    questions = [q for ds in datasets() for q, _ in ds.questions]
    sample = random.Random(1).sample(questions, args.queries)
    rows = [speed(int(s), sample) for s in args.sizes.split(",")]
    headers = [
        "chunks",
        "rank-bm25 build s",
        "bm25s build s",
        "rank-bm25 p50 ms",
        "rank-bm25 p95 ms",
        "bm25s p50 ms",
        "bm25s p95 ms",
        "speed-up p50",
    ]
    print()
    print(table(headers, rows))


if __name__ == "__main__":
    main()
