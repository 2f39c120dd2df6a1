"""`python -m eval` (what `make eval` runs): retrieval evaluation, the leave-one-manual-out
table, then answer evaluation."""

from __future__ import annotations

import runpy
import sys

STEPS = ["eval.retrieval", "eval.manuals_loo", "eval.answers"]

if __name__ == "__main__":
    for module in STEPS:
        print(f"\n== {module} ==", flush=True)
        sys.argv = [module]
        runpy.run_module(module, run_name="__main__")
