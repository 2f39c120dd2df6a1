"""`python -m eval` (what `make eval` runs): retrieval evaluation, the leave-one-manual-out
table, the plain ensemble a newcomer would build on the same questions, then answer
evaluation."""

from __future__ import annotations

import runpy
import sys

STEPS = ["eval.retrieval", "eval.manuals_loo", "eval.peer_ensemble", "eval.answers"]

if __name__ == "__main__":
    for module in STEPS:
        print(f"\n== {module} ==", flush=True)
        sys.argv = [module]
        runpy.run_module(module, run_name="__main__")
