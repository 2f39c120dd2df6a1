"""Memory per tenant and search time after eviction, in one process (issue #29).

N tenants each index one ~6 KB text file (the real USE embedder, embedded Chroma) and search it;
RSS is read after the first, the middle and the last tenant, then every tenant searches again
(after eviction when RAG_HOT_TENANTS < N) and once more.

    python -m bench.hot_tenants HOT TENANTS [CHROMA_CACHE_MB]

CHROMA_CACHE_MB, when given, also turns on Chroma's LRU segment cache with that memory limit.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path


def rss_mb() -> float:
    """Resident memory of this process, MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def limit_chroma_cache(megabytes: int) -> None:
    """Every Chroma client built from here on uses an LRU segment cache of this size."""
    import chromadb.config

    original = chromadb.config.Settings.__init__

    def init(self: chromadb.config.Settings, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("chroma_segment_cache_policy", "LRU")
        kwargs.setdefault("chroma_memory_limit_bytes", megabytes * 2**20)
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    chromadb.config.Settings.__init__ = init  # type: ignore[method-assign]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[int(share * (len(ordered) - 1))]


def main() -> None:
    hot, tenants = int(sys.argv[1]), int(sys.argv[2])
    if len(sys.argv) > 3:
        limit_chroma_cache(int(sys.argv[3]))
    from app.config import load_settings
    from app.services.container import Container
    from app.services.pipeline import index_file

    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(
            _env_file=None, data_dir=Path(data), env="development", hot_tenants=hot
        )
        container = Container(settings)
        docs = Path(data) / "docs"
        docs.mkdir()
        text = Path("/usr/share/common-licenses/GPL-3").read_text(encoding="utf-8")[:6000]
        marks: list[tuple[int, float]] = []
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
                marks.append((n + 1, rss_mb()))
        revisit: list[float] = []
        again: list[float] = []
        for n in range(tenants):
            for times in (revisit, again):
                started = time.perf_counter()
                container.retriever.search(f"t{n}", f"code K{n}X warranty", 5)
                times.append(1000 * (time.perf_counter() - started))
        per_tenant = (marks[-1][1] - marks[1][1]) / (tenants - tenants // 2)
        held = len(container.retriever.keyword_index.hot_tenants)
        print(
            f"hot={hot} tenants={tenants} RSS MB after "
            + ", ".join(f"{n}: {mb:.0f}" for n, mb in marks)
            + f"; {per_tenant:.2f} MB per tenant (second half); keyword indexes held {held}; "
            f"revisit search p50/p95 {percentile(revisit, 0.5):.1f}/{percentile(revisit, 0.95):.1f}"
            f" ms, again {percentile(again, 0.5):.1f}/{percentile(again, 0.95):.1f} ms"
        )


if __name__ == "__main__":
    main()
