"""`python -m bench` (what `make bench` runs): every benchmark in turn, each printing a table."""

from __future__ import annotations

import runpy
import sys

STEPS = [
    ["bench.ingest"],
    ["bench.ingest", "--one-file-per-request"],
    ["bench.chroma_write"],
    ["bench.rag_sync"],
    ["bench.page_render"],
    ["bench.ocr"],
    ["bench.retrieval", "--sizes", "1000,10000,100000"],
    ["bench.grouping"],
    ["bench.answer"],
    ["bench.load"],
    ["bench.fairness"],
    ["bench.noisy_neighbour"],
    ["bench.auth"],
]

if __name__ == "__main__":
    only = set(sys.argv[1:])
    for module, *args in STEPS:
        if only and module.split(".")[-1] not in only:
            continue
        print(f"\n== {module} {' '.join(args)} ==", flush=True)
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__")
