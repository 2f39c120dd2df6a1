"""A cold tenant's search at SIZE chunks, and the one-tenant costs at that size.

Two tenants of SIZE chunks each (real XQuAD sentences recombined as in bench.retrieval; pool
`use` vectors plus noise, so loading does not wait for the embedder) in one process with
RAG_HOT_TENANTS=1: searching them in turn makes every search cold (the keyword snapshot is loaded
from disk and embedded Chroma reloads the HNSW index its cache evicted). Also reports load
(ingest) time, the keyword index build, disk per tenant, RSS held per hot tenant, warm hybrid
and dense-only (no keyword arm) p50/p95, and a restarted process's first search.

    python -m bench.cold_tenant [SIZE] [QUERIES]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from app.config import load_settings
from app.container import Container
from app.domain import Chunk, chunk_id, document_id
from app.memory import resident_mb
from app.retrieval.hybrid import RetrievalMode
from app.timing import start_timer
from bench.bm25_libraries import synthetic_chunks
from bench.common import median, percentile
from bench.tokenizer_ablation import datasets

POOL = 300
DOC_SIZE = 1000
NOISE = 0.35  # spread of each chunk's vector around its pooled real vector
TENANTS = ("cold-a", "cold-b")


def write_pooled(
    container: Container,
    tenant: str,
    texts: list[str],
    pool: np.ndarray,
    rng: np.random.Generator,
    progress: bool = False,
) -> None:
    """Store `texts` as the tenant's documents of DOC_SIZE chunks, each vector a pooled real
    vector plus NOISE (so loading does not wait for the embedder)."""
    started = time.perf_counter()
    for begin in range(0, len(texts), DOC_SIZE):
        part = texts[begin : begin + DOC_SIZE]
        source = f"doc{begin // DOC_SIZE:05d}.txt"
        doc = document_id(tenant, source)
        chunks = [
            Chunk(chunk_id(tenant, doc, 1, t), tenant, doc, source, 1, "1", i, 0, len(t), t)
            for i, t in enumerate(part)
        ]
        base = pool[rng.integers(0, len(pool), len(part))]
        noisy = base + NOISE * rng.standard_normal(base.shape) / np.sqrt(base.shape[1])
        vectors = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
        container.corpus.replace_documents(
            tenant_id=tenant, documents=[(doc, chunks, vectors.tolist())]
        )
        if progress and begin and begin % (20 * DOC_SIZE) == 0:
            elapsed = time.perf_counter() - started
            print(f"  {begin} chunks written, {elapsed:.0f} s", file=sys.stderr)


def load_tenant(container: Container, tenant: str, texts: list[str], seed: int) -> float:
    """Store `texts` as the tenant's documents of DOC_SIZE chunks; returns seconds."""
    started = time.perf_counter()
    pool = np.array(container.embedder.embed_documents(texts[:POOL]))
    write_pooled(container, tenant, texts, pool, np.random.default_rng(seed))
    return time.perf_counter() - started


def timed_ms(action: object) -> float:
    started = time.perf_counter()
    action()  # type: ignore[operator]
    return 1000 * (time.perf_counter() - started)


def disk_mb(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0]) / 1024


def main() -> None:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    queries = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    questions = [q for dataset in datasets() for q, _ in dataset.questions][:queries]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        settings = load_settings(
            _env_file=None, data_dir=data, embedding_provider="use", reranker="none", hot_tenants=1
        )
        container = Container(settings)
        retriever = container.retriever
        baseline = resident_mb()
        load_s = [
            load_tenant(container, t, synthetic_chunks(size, seed=n), n)
            for n, t in enumerate(TENANTS)
        ]
        build_s = [timed_ms(lambda t=t: retriever.refresh(t)) / 1000 for t in TENANTS]
        loaded = resident_mb()

        stages: dict[str, list[float]] = {}

        def search(tenant: str, question: str, mode: RetrievalMode = "hybrid") -> float:
            timer = start_timer()
            retriever.search(tenant, question, 5, mode=mode)
            for stage, ms in timer.stages.items():
                stages.setdefault(stage, []).append(ms)
            return timer.total_ms()

        cold = [search(TENANTS[n % 2], q) for n, q in enumerate(questions * 2)]
        cold_stages = {stage: median(values) for stage, values in stages.items()}
        warm = [search(TENANTS[0], q) for q in questions]
        dense = [search(TENANTS[0], q, "dense") for q in questions]
        held = resident_mb()
        disk = disk_mb(data) / len(TENANTS)
        restarted = Container(settings)  # a new process would build the same; the dir is ours
        restart_ms = timed_ms(lambda: restarted.retriever.search(TENANTS[1], questions[0], 5))
    print(
        f"size={size} queries={len(questions)}: load {median(load_s):.1f} s per tenant, keyword "
        f"build {median(build_s):.1f} s, disk {disk:.0f} MB per tenant, RSS {baseline:.0f} -> "
        f"{loaded:.0f} MB after loading 2 tenants, {held:.0f} MB after searches; cold search "
        f"p50/p95 {median(cold):.0f}/{percentile(cold, 95):.0f} ms, warm hybrid "
        f"{median(warm):.0f}/{percentile(warm, 95):.0f} ms, warm dense-only "
        f"{median(dense):.0f}/{percentile(dense, 95):.0f} ms; first search of a new container "
        f"{restart_ms:.0f} ms; cold stage p50s "
        + ", ".join(f"{stage} {ms:.1f}" for stage, ms in cold_stages.items())
        + " ms"
    )


if __name__ == "__main__":
    main()
