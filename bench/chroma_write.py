"""`python -m bench.chroma_write`: what one upload's vector write costs the API process, by the
size of the tenant's collection.

Embedded Chroma's native code holds Python's GIL for the whole of an upsert, its SQLite commits
and its index persistence included, so every other thread of the process (requests, the other
ingest thread) waits that long. The product's index (`ChromaVectorIndex`: every collection
persists its HNSW index after `SYNC_THRESHOLD` elements, each upsert written once) is timed
against a collection at Chroma's own sync threshold, for a one-chunk and a two-chunk upload, on
collections of growing size. Also timed: how long a thread that only counts is held off during
the product's writes (the GIL, not the disk alone).

    python -m bench.chroma_write [--sizes 0 10000 50000] [--writes 40]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from chromadb.api.models.Collection import Collection

from app.config import load_settings
from app.storage.chroma_index import SYNC_THRESHOLD, ChromaVectorIndex, chroma_client
from app.storage.vector_index import IndexedVector
from bench.common import percentile, table

DIMENSION = 512  # the default embedder's (USE)
FILL_PAGE = 500


def _vectors(rng: np.random.Generator, prefix: str, count: int) -> list[IndexedVector]:
    rows = rng.random((count, DIMENSION), dtype=np.float32)
    return [IndexedVector(f"{prefix}-{n}", prefix, row.tolist()) for n, row in enumerate(rows)]


def _product_index(root: Path) -> ChromaVectorIndex:
    settings = load_settings(_env_file=None, data_dir=root)
    return ChromaVectorIndex(chroma_client(settings), "bench-model", DIMENSION)


def _held_off(write: Callable[[int], None], writes: int) -> tuple[list[float], float]:
    """Each write's milliseconds, and the share of the time a counting thread was held off."""
    gaps: list[float] = []
    stop = threading.Event()

    def count() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            now = time.perf_counter()
            if now - last > 0.002:  # a gap no scheduler tick explains
                gaps.append(now - last)
            last = now

    counter = threading.Thread(target=count, daemon=True)
    counter.start()
    started = time.perf_counter()
    times = []
    for n in range(writes):
        begin = time.perf_counter()
        write(n)
        times.append((time.perf_counter() - begin) * 1000)
    elapsed = time.perf_counter() - started
    stop.set()
    counter.join()
    return times, sum(gaps) / elapsed


def _plain_write(collection: Collection, vectors: list[IndexedVector]) -> None:
    embeddings = np.asarray([v.vector for v in vectors], dtype=np.float32)
    collection.upsert(ids=[v.chunk_id for v in vectors], embeddings=embeddings)


def _one_size(root: Path, size: int, writes: int, rng: np.random.Generator) -> list[object]:
    """The row of one collection size: the product's writes, then Chroma's default."""
    index = _product_index(root)
    for begin in range(0, size, FILL_PAGE):
        index.upsert("t", _vectors(rng, f"fill{begin}", min(FILL_PAGE, size - begin)))
    one, held = _held_off(lambda n: index.upsert("t", _vectors(rng, f"a{n}", 1)), writes)
    two, _ = _held_off(lambda n: index.upsert("t", _vectors(rng, f"b{n}", 2)), writes)
    plain = index.client.get_or_create_collection(
        "plain-default", configuration={"hnsw": {"space": "cosine"}}
    )
    for begin in range(0, size, FILL_PAGE):
        _plain_write(plain, _vectors(rng, f"pfill{begin}", min(FILL_PAGE, size - begin)))
    default, _ = _held_off(lambda n: _plain_write(plain, _vectors(rng, f"p{n}", 2)), writes)
    return [
        size,
        percentile(one, 50),
        percentile(two, 50),
        percentile(default, 50),
        f"{100 * held:.0f}%",
    ]


def run(sizes: list[int], writes: int) -> None:
    """Print the table."""
    rng = np.random.default_rng(7)
    rows = []
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(_one_size(Path(tmp), size, writes, rng))
    print(
        f"ms per upsert, median of {writes}; product: sync threshold {SYNC_THRESHOLD}, written "
        "once; Chroma default: sync threshold 1000, written once"
    )
    print(
        table(
            [
                "vectors in the collection",
                "product, 1 vector",
                "product, 2 vectors",
                "Chroma default, 2 vectors",
                "counting thread held off (product, 1 vector)",
            ],
            rows,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 10_000, 50_000])
    parser.add_argument("--writes", type=int, default=40)
    args = parser.parse_args()
    run(args.sizes, args.writes)


if __name__ == "__main__":
    main()
