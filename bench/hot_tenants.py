"""Memory per tenant and search time after eviction, in one process.

N tenants each index one ~6 KB text file (the real USE embedder, embedded Chroma) and search it;
RSS is read after the first, the middle and the last tenant, then every tenant searches again
(after eviction when RAG_HOT_TENANTS < N) and once more.

    python -m bench.hot_tenants HOT TENANTS [CHROMA_CACHE_MB]

CHROMA_CACHE_MB, when given, also turns on Chroma's LRU segment cache with that memory limit
(the Rust core ignores it: measured, no change). BENCH_TRACEMALLOC=1 also reports the Python-side
allocations per tenant. The last line reports RSS after a final malloc_trim(0), so what glibc
kept of freed memory shows apart from what is still held.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from app.memory import resident_mb, return_freed_memory
from bench.common import median, percentile


def limit_chroma_cache(megabytes: int) -> None:
    """Every Chroma client built from here on uses an LRU segment cache of this size."""
    import chromadb.config

    original = chromadb.config.Settings.__init__

    def init(self: chromadb.config.Settings, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("chroma_segment_cache_policy", "LRU")
        kwargs.setdefault("chroma_memory_limit_bytes", megabytes * 2**20)
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    chromadb.config.Settings.__init__ = init  # type: ignore[method-assign]


def rollup() -> dict[str, int]:
    """/proc/self/smaps_rollup in kB: anonymous (heap) vs file-backed (mapped files) memory."""
    with open("/proc/self/smaps_rollup") as smaps:
        rows = [line.split() for line in smaps if line.strip().endswith("kB")]
    return {row[0].rstrip(":"): int(row[1]) for row in rows}


def main() -> None:
    hot, tenants = int(sys.argv[1]), int(sys.argv[2])
    if len(sys.argv) > 3:
        limit_chroma_cache(int(sys.argv[3]))
    from app.config import load_settings
    from app.container import Container
    from testkit.indexing import index_file

    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(
            _env_file=None, data_dir=Path(data), env="development", hot_tenants=hot
        )
        container = Container(settings)
        docs = Path(data) / "docs"
        docs.mkdir()
        text = Path("/usr/share/common-licenses/GPL-3").read_text(encoding="utf-8")[:6000]
        marks: list[tuple[int, float]] = []
        traced: list[int] = []
        rolled: list[dict[str, int]] = []
        if os.environ.get("BENCH_TRACEMALLOC") == "1":
            tracemalloc.start()
        for n in range(tenants):
            path = docs / f"t{n}.txt"
            path.write_text(f"Tenant {n} code K{n}X.\n" + text, encoding="utf-8")
            index_file(
                path,
                tenant_id=f"t{n}",
                source=path.name,
                embedder=container.embedder,
                corpus=container.corpus,
                config=container.pipeline_config,
            )
            container.retriever.search(f"t{n}", "warranty of merchantability", 5)
            if n in (0, tenants // 2 - 1, tenants - 1):
                marks.append((n + 1, resident_mb()))
                traced.append(tracemalloc.get_traced_memory()[0])
                rolled.append(rollup())
        revisit: list[float] = []
        again: list[float] = []
        for n in range(tenants):
            for times in (revisit, again):
                started = time.perf_counter()
                container.retriever.search(f"t{n}", f"code K{n}X warranty", 5)
                times.append(1000 * (time.perf_counter() - started))
        per_tenant = (marks[-1][1] - marks[1][1]) / (tenants - tenants // 2)
        held = len(container.retriever.keyword_index.hot_tenants)
        client = getattr(container.vector_index, "client", None)
        native = getattr(getattr(client, "_server", None), "hnsw_cache_size", "n/a")
        handles = len(getattr(container.vector_index, "hot_tenants", []))
        python_kb = (traced[-1] - traced[1]) / 1024 / (tenants - tenants // 2)
        print(
            f"hot={hot} tenants={tenants} RSS MB after "
            + ", ".join(f"{n}: {mb:.0f}" for n, mb in marks)
            + f"; {per_tenant:.2f} MB per tenant (second half); keyword indexes held {held}; "
            f"revisit search p50/p95 {median(revisit):.1f}/{percentile(revisit, 95):.1f}"
            f" ms, again {median(again):.1f}/{percentile(again, 95):.1f} ms"
        )
        half = tenants - tenants // 2
        anon = (rolled[-1]["Anonymous"] - rolled[1]["Anonymous"]) / 1024 / half
        mapped = (rolled[-1]["Rss"] - rolled[-1]["Anonymous"]) - (
            rolled[1]["Rss"] - rolled[1]["Anonymous"]
        )
        print(
            f"second half per tenant: anonymous {anon:.2f} MB, file-backed "
            f"{mapped / 1024 / half:.2f} MB (smaps_rollup)"
        )
        before = resident_mb()
        return_freed_memory()
        print(
            f"Chroma HNSW cache {native} collections, handles held {handles}, trims "
            f"{getattr(container, 'memory_budget', None) and container.memory_budget.trims}; "
            f"Python-side {python_kb:.1f} KB per tenant (tracemalloc, 0 when off); RSS {before:.0f}"
            f" MB, after malloc_trim {resident_mb():.0f} MB"
        )


if __name__ == "__main__":
    main()
