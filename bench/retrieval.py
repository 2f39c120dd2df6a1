"""Retrieval latency at 1k / 10k / 100k chunks in one tenant, against the naive design.

Query path (all real): `use` query embedding + Chroma dense query + persistent BM25 keyword
index + RRF, reranker off, exact-match lookup on. The naive design runs the same code, except
that its keyword index is rebuilt from the store on every query. Chunk texts are real XQuAD
sentences (en + ar) recombined into ~120-word chunks; for bulk loading, vectors are real `use`
vectors of a pool of chunks plus noise (embedding 100k passages would take ~8 minutes). Also
reports the reranker's latency for 20 candidates (tiny random cross-encoder), the memory the
keyword index holds per 10k chunks, and the time to bring it up to date after one upload.

    python -m bench.retrieval [--sizes 1000,10000,100000] [--queries 60] [--naive-queries 10]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from app.config import Settings, load_settings
from app.domain import Chunk, chunk_id, document_id
from app.providers.embeddings import build_embedder
from app.providers.rerankers import build_reranker
from app.retrieval.hybrid import HybridRetriever, build_retriever
from app.retrieval.keyword import KeywordIndex, KeywordSnapshot
from app.timing import start_timer
from bench.bm25_libraries import synthetic_chunks
from bench.common import median, percentile, table
from bench.tokenizer_ablation import datasets
from testkit.indexing import build_corpus

TENANT = "bench-tenant"
POOL = 300  # real `use` vectors; the rest of the corpus reuses them plus noise
DOC_SIZE = 1000


class NaiveKeywordIndex(KeywordIndex):
    """The naive design: BM25 rebuilt from every chunk in the store on every query."""

    def snapshot(self, tenant_id: str) -> KeywordSnapshot:
        return self._rebuild(tenant_id, self._store.corpus_version(tenant_id))

    def _save(self, snap: KeywordSnapshot) -> None:
        return None


def _page_one_chunks(source: str, texts: list[str]) -> list[Chunk]:
    """`texts` as the chunks of page 1 of document `source` of the benchmark tenant."""
    doc = document_id(TENANT, source)
    return [
        Chunk(chunk_id(TENANT, doc, 1, t), TENANT, doc, source, 1, "1", i, 0, len(t), t)
        for i, t in enumerate(texts)
    ]


def _load(
    store: object, embedder: object, texts: list[str], seed: int = 3, doc_size: int = DOC_SIZE
) -> float:
    """Store `texts` as documents of `doc_size` chunks; pool vectors + noise. Returns seconds."""
    started = time.perf_counter()
    pool = np.array(embedder.embed_documents(texts[:POOL]))  # type: ignore[attr-defined]
    rng = np.random.default_rng(seed)
    for begin in range(0, len(texts), doc_size):
        part = texts[begin : begin + doc_size]
        source = f"doc{begin // doc_size:04d}.txt"
        doc = document_id(TENANT, source)
        chunks = _page_one_chunks(source, part)
        base = pool[rng.integers(0, len(pool), len(part))]
        noisy = base + 0.35 * rng.standard_normal(base.shape) / np.sqrt(base.shape[1])
        vectors = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
        real = min(max(len(pool) - begin, 0), len(part))  # the pool's own chunks keep theirs
        vectors[:real] = pool[begin : begin + real]
        store.replace_documents(  # type: ignore[attr-defined]
            tenant_id=TENANT, documents=[(doc, chunks, vectors.tolist())]
        )
    return time.perf_counter() - started


def _latencies(
    retriever: HybridRetriever, questions: list[str]
) -> tuple[list[float], dict[str, list[float]]]:
    totals: list[float] = []
    stages: dict[str, list[float]] = {}
    for question in questions:
        timer = start_timer()
        retriever.search(TENANT, question, 5, mode="hybrid")
        totals.append(timer.total_ms())
        for name, ms in timer.stages.items():
            stages.setdefault(name, []).append(ms)
    return totals, stages


def _refresh_after_upload(store: object, embedder: object, retriever: HybridRetriever) -> float:
    """Seconds to bring the keyword index up to date after one 16-chunk upload (incremental:
    only the new chunks are read and tokenized, the tenant is re-scored from token ids)."""
    source = "upload.txt"
    texts = synthetic_chunks(16, seed=99)
    chunks = _page_one_chunks(source, texts)
    doc = chunks[0].document_id
    vectors = embedder.embed_documents(texts)  # type: ignore[attr-defined]
    store.replace_documents(  # type: ignore[attr-defined]
        tenant_id=TENANT, documents=[(doc, chunks, vectors)]
    )
    started = time.perf_counter()
    retriever.refresh(TENANT)
    return time.perf_counter() - started


def _index_memory(store: object, settings: Settings) -> float:
    """Bytes a freshly loaded keyword index holds (measured with tracemalloc); built with the
    service's own settings, so it loads the persisted snapshot instead of rebuilding."""
    gc.collect()
    tracemalloc.start()
    index = KeywordIndex(
        store,  # type: ignore[arg-type]
        settings.data_dir / "keyword",
        section_paths=settings.section_paths_in("keyword"),
    )
    snap = index.snapshot(TENANT)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert index.loads[TENANT] == 1 and snap.chunk_ids
    return float(held)


def run_size(size: int, questions: list[str], naive_queries: int) -> list[object]:
    """One row of the table for `size` chunks."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(_env_file=None, data_dir=Path(tmp), embedding_provider="use")
        embedder = build_embedder(settings)
        store = build_corpus(settings, embedder)
        load_s = _load(store, embedder, synthetic_chunks(size))
        retriever = build_retriever(settings, embedder, store, reranker=None)
        started = time.perf_counter()
        retriever.refresh(TENANT)
        build_s = time.perf_counter() - started
        retriever.search(TENANT, questions[0], 5, mode="hybrid")  # warm caches
        totals, stages = _latencies(retriever, questions)
        assert retriever.keyword_index.rebuilds[TENANT] == 1, "index rebuilt during queries"

        upload_refresh_s = _refresh_after_upload(store, embedder, retriever)
        naive_index = NaiveKeywordIndex(store, Path(tmp) / "naive")
        naive = HybridRetriever(embedder, store, naive_index, retriever.config)
        naive_totals, _ = _latencies(naive, questions[:naive_queries])
        memory = _index_memory(store, settings)
        p50 = median(totals)
        return [
            size,
            round(load_s, 1),
            round(build_s, 2),
            round(upload_refresh_s, 3),
            round(p50, 1),
            round(percentile(totals, 95), 1),
            *(round(median(stages.get(s, [0.0])), 2) for s in ("embed_query", "dense", "keyword")),
            round(median(stages.get("fuse", [0.0])), 3),
            round(median(naive_totals), 0),
            round(percentile(naive_totals, 95), 0),
            f"{median(naive_totals) / p50:.0f}x",
            round(memory / size * 10_000 / 1e6, 2),
        ]


def sample_questions(count: int) -> list[str]:
    """`count` real XQuAD questions (seeded); every tenth asks for an identifier instead, so the
    exact-match lookup is on the measured path."""
    pool = [q for ds in datasets() for q, _ in ds.questions]
    questions = random.Random(5).sample(pool, count)
    questions[::10] = [f"What is the weight of item SR-{i}33?" for i in range(len(questions[::10]))]
    return questions


def reranker_latency(runs: int = 20) -> tuple[float, float]:
    """p50/p95 ms to rerank 20 real ~1200-char candidates with the tiny cross-encoder."""
    from testkit.tiny_cross_encoder import save_tiny_cross_encoder

    with tempfile.TemporaryDirectory() as tmp:
        folder = save_tiny_cross_encoder(Path(tmp) / "tiny")
        settings = load_settings(
            _env_file=None, data_dir=Path(tmp), reranker="cross-encoder", reranker_model=str(folder)
        )
        reranker = build_reranker(settings)
        assert reranker is not None
        passages = [t[: settings.reranker_max_chars] for t in synthetic_chunks(20, seed=11)]
        reranker.score("warm up", passages)
        times = []
        for i in range(runs):
            started = time.perf_counter()
            reranker.score(f"question number {i} about the river", passages)
            times.append((time.perf_counter() - started) * 1000)
    return median(times), percentile(times, 95)


def main() -> None:
    """Print the latency table and the reranker line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--naive-queries", type=int, default=10)
    args = parser.parse_args()
    questions = sample_questions(args.queries)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        naive_n = args.naive_queries if size < 50_000 else max(2, args.naive_queries // 5)
        rows.append(run_size(size, questions, naive_n))
        print(f"done {size}: {rows[-1]}", flush=True)
    headers = [
        "chunks",
        "load s",
        "index build s",
        "refresh after upload s",
        "hybrid p50 ms",
        "hybrid p95 ms",
        "embed p50",
        "dense p50",
        "keyword p50",
        "fuse p50",
        "naive p50 ms",
        "naive p95 ms",
        "speed-up",
        "index MB/10k chunks",
    ]
    print(table(headers, rows))
    p50, p95 = reranker_latency()
    print(
        "\nreranker (tiny random BERT cross-encoder), 20 candidates: "
        f"p50 {p50:.1f} ms, p95 {p95:.1f} ms"
    )


if __name__ == "__main__":
    main()
