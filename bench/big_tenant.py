"""One big tenant at SIZE chunks: the one-tenant scale curve.

The tenant's chunks are real XQuAD sentences recombined (~120 words each, bench.bm25_libraries);
their vectors are `use` vectors of POOL real chunks plus noise (bench.cold_tenant), so loading
1M chunks does not wait ~80 minutes for the embedder: the embedding rate is measured on the pool
and reported separately. Measures, in this process: vector + row write time, the keyword index's
full build from the store, disk, warm hybrid and dense-only (no keyword arm) /search p50/p95.
Then a NEW process opens the same data directory and reports its start-up (imports + model) and
its first dense and first hybrid search, RSS after each (what the HNSW index and the keyword
index cost in memory), whether the keyword index was loaded from disk or rebuilt, and that its
results equal the first process's. Last, another process loads the keyword index, uploads one
10-chunk document and refreshes the keyword index (the cost every upload pays at this size).

    python -m bench.big_tenant [SIZE] [QUERIES] [DATA_DIR]
    python -m bench.big_tenant --change DATA_DIR   (only that last step, on a kept DATA_DIR)

DATA_DIR (optional) is kept afterwards; by default a temporary directory is used and removed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from app.config import Settings, load_settings
from app.container import Container
from app.domain import Chunk, chunk_id, document_id
from app.memory import resident_mb
from app.retrieval.hybrid import RetrievalMode
from bench.bm25_libraries import synthetic_chunks
from bench.cold_tenant import POOL, disk_mb, timed_ms, write_pooled
from bench.common import median, percentile
from bench.tokenizer_ablation import datasets

TENANT = "big"


def bench_settings(data: Path) -> Settings:
    return load_settings(
        _env_file=None,
        data_dir=data,
        embedding_provider="use",
        reranker="none",
        quota_chunks=10_000_000,
    )


def write_tenant(container: Container, texts: list[str]) -> tuple[float, float]:
    """Store `texts` as documents of DOC_SIZE chunks with pooled vectors plus noise; returns
    (embedding rate in passages/s measured on the pool, seconds spent writing)."""
    started = time.perf_counter()
    pool = np.array(container.embedder.embed_documents(texts[:POOL]))
    rate = POOL / (time.perf_counter() - started)
    started = time.perf_counter()
    write_pooled(container, TENANT, texts, pool, np.random.default_rng(0), progress=True)
    return rate, time.perf_counter() - started


def ranked_hits(
    container: Container, questions: list[str], mode: RetrievalMode
) -> list[list[list[str]]]:
    """For each question, its 5 best chunks as [document id, text], best first."""
    return [
        [
            [hit.chunk.document_id, hit.chunk.text]
            for hit in container.retriever.search(TENANT, q, 5, mode=mode).hits
        ]
        for q in questions
    ]


def probe(data: Path, questions: list[str]) -> dict[str, object]:
    """What a restarted process sees (run in a new process by `restart`)."""
    container = Container(bench_settings(data))
    container.embedder.embed_query("warm up the model")
    ready_mb = resident_mb()
    retriever = container.retriever
    first_dense_ms = timed_ms(lambda: retriever.search(TENANT, questions[0], 5, mode="dense"))
    dense_mb = resident_mb()
    first_hybrid_ms = timed_ms(lambda: retriever.search(TENANT, questions[0], 5))
    hybrid_mb = resident_mb()
    keyword = retriever.keyword_index
    return {
        "ready_mb": ready_mb,
        "first_dense_ms": first_dense_ms,
        "dense_mb": dense_mb,
        "first_hybrid_ms": first_hybrid_ms,
        "hybrid_mb": hybrid_mb,
        "keyword_loads": keyword.loads[TENANT],
        "keyword_rebuilds": keyword.rebuilds[TENANT],
        "hybrid_ids": ranked_hits(container, questions, "hybrid"),
        "dense_ids": ranked_hits(container, questions, "dense"),
    }


def write_and_search(data: Path, size: int, questions: list[str]) -> dict[str, object]:
    """The first process: write, build the keyword index, search warm (run by `measure` in a
    process of its own, since one process owns an embedded Chroma directory)."""
    container = Container(bench_settings(data))
    retriever = container.retriever
    baseline = resident_mb()
    texts = synthetic_chunks(size)
    rate, write_s = write_tenant(container, texts)
    del texts
    written = resident_mb()
    build_s = timed_ms(lambda: retriever.refresh(TENANT)) / 1000
    built = resident_mb()

    def timed(question: str, mode: RetrievalMode) -> float:
        return timed_ms(lambda: retriever.search(TENANT, question, 5, mode=mode))

    container.embedder.embed_query("warm up the model")  # as a server does at start-up
    hybrid = [timed(q, "hybrid") for q in questions]
    dense = [timed(q, "dense") for q in questions]
    return {
        "rate": rate,
        "write_s": write_s,
        "build_s": build_s,
        "baseline_mb": baseline,
        "written_mb": written,
        "built_mb": built,
        "held_mb": resident_mb(),
        "hybrid_ms": hybrid,
        "dense_ms": dense,
        "hybrid_ids": ranked_hits(container, questions, "hybrid"),
        "dense_ids": ranked_hits(container, questions, "dense"),
    }


def change_one_document(data: Path) -> dict[str, object]:
    """A process that loads the tenant's keyword index, then uploads one 10-chunk document (real
    embeddings) and brings the keyword index up to date: what every upload costs at this size."""
    container = Container(bench_settings(data))
    retriever = container.retriever
    load_ms = timed_ms(lambda: retriever.refresh(TENANT))
    texts = synthetic_chunks(10, seed=99)
    doc = document_id(TENANT, "change.txt")
    chunks = [
        Chunk(chunk_id(TENANT, doc, 1, t), TENANT, doc, "change.txt", 1, "1", i, 0, len(t), t)
        for i, t in enumerate(texts)
    ]
    vectors = container.embedder.embed_documents(texts)
    write_ms = timed_ms(
        lambda: container.corpus.replace_documents(
            tenant_id=TENANT, documents=[(doc, chunks, vectors)]
        )
    )
    refresh_ms = timed_ms(lambda: retriever.refresh(TENANT))
    keyword = retriever.keyword_index
    return {
        "load_ms": load_ms,
        "write_ms": write_ms,
        "refresh_ms": refresh_ms,
        "loads": keyword.loads[TENANT],
        "rebuilds": keyword.rebuilds[TENANT],
    }


def in_new_process(*args: str) -> tuple[float, dict[str, object]]:
    """Run this module with `args` in a new Python process; (its wall seconds, its report)."""
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "bench.big_tenant", *args],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - started
    return wall, json.loads(out.stdout.strip().splitlines()[-1])


def changed_report(data: Path) -> str:
    """`change_one_document` in a new process, as one line."""
    _, changed = in_new_process("--change", str(data))
    return (
        f"keyword index loaded from disk in {changed['load_ms']:.0f} ms, document written in "
        f"{changed['write_ms']:.0f} ms, keyword refresh {changed['refresh_ms']:.0f} ms "
        f"(loads {changed['loads']}, rebuilds {changed['rebuilds']})"
    )


def measure(data: Path, size: int, queries: int) -> None:
    questions = [q for dataset in datasets() for q, _ in dataset.questions][:queries]
    asked = json.dumps(questions)
    print(f"size={size} queries={len(questions)}; load average before: {os.getloadavg()}")
    _, first = in_new_process("--write", str(data), str(size), asked)
    disk_total = disk_mb(data)
    disk_keyword = disk_mb(data / "keyword")
    disk_chroma = disk_mb(data / "chroma")
    load_mid = os.getloadavg()
    wall, seen = in_new_process("--probe", str(data), asked)
    same = seen["hybrid_ids"] == first["hybrid_ids"] and seen["dense_ids"] == first["dense_ids"]
    hybrid, dense = first["hybrid_ms"], first["dense_ms"]
    assert isinstance(hybrid, list) and isinstance(dense, list)
    rate = float(first["rate"])  # type: ignore[arg-type]
    print(
        f"  load average after writing: {load_mid}\n"
        f"  embedding rate on the pool {rate:.0f} passages/s -> {size / rate / 60:.1f} min to "
        f"embed {size} chunks (not run)\n"
        f"  write (vectors + rows) {first['write_s']:.1f} s; keyword full build "
        f"{first['build_s']:.1f} s\n"
        f"  disk {disk_total:.0f} MB (chroma {disk_chroma:.0f}, keyword {disk_keyword:.0f}, rows "
        f"and the rest {disk_total - disk_chroma - disk_keyword:.0f})\n"
        f"  RSS {first['baseline_mb']:.0f} MB before, {first['written_mb']:.0f} after writing, "
        f"{first['built_mb']:.0f} after the keyword build, {first['held_mb']:.0f} after searches\n"
        f"  warm hybrid p50/p95 {median(hybrid):.1f}/{percentile(hybrid, 95):.1f} ms, "
        f"dense-only {median(dense):.1f}/{percentile(dense, 95):.1f} ms\n"
        f"  restart: new process exits after {wall:.1f} s; RSS ready {seen['ready_mb']:.0f} MB, "
        f"after first dense {seen['dense_mb']:.0f} MB ({seen['first_dense_ms']:.0f} ms), after "
        f"first hybrid {seen['hybrid_mb']:.0f} MB ({seen['first_hybrid_ms']:.0f} ms); keyword "
        f"loads {seen['keyword_loads']} rebuilds {seen['keyword_rebuilds']}; same results {same}"
        f"\n  upload of one 10-chunk document: {changed_report(data)}"
        f"\n  load average after: {os.getloadavg()}",
        flush=True,
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--probe":
        print(json.dumps(probe(Path(sys.argv[2]), json.loads(sys.argv[3]))))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--change":
        print(json.dumps(change_one_document(Path(sys.argv[2]))))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--write":
        report = write_and_search(Path(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4]))
        print(json.dumps(report))
        return
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    queries = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    if len(sys.argv) > 3:
        data = Path(sys.argv[3])
        data.mkdir(parents=True, exist_ok=False)
        measure(data, size, queries)
        return
    with tempfile.TemporaryDirectory() as tmp:
        measure(Path(tmp), size, queries)


if __name__ == "__main__":
    main()
