"""Every benchmark and evaluation script imports cleanly and has a `main`.

They are run by hand (`make bench`, `make eval`), not by the suite, so a renamed function they
import would otherwise go unnoticed until someone runs them.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
# Modules the scripts import, run by none on their own (bench.ingest_http is `python -m
# bench.ingest --one-file-per-request`, bench.ingest_wait `--upload-and-wait`).
HELPERS = {"__init__", "__main__", "common", "datasets", "metrics", "custom_set", "scan_render"}
HELPERS |= {"ingest_common", "ingest_http", "ingest_wait", "fusion_families", "glued_words"}
HELPERS |= {"query_signals", "manual_sample", "corpus_terms"}
SCRIPTS = sorted(
    f"{folder}.{path.stem}"
    for folder in ("bench", "eval")
    for path in (ROOT / folder).glob("*.py")
    if path.stem not in HELPERS
)


@pytest.mark.parametrize("module", SCRIPTS)
def test_script_imports_and_has_a_main(module: str) -> None:
    loaded = importlib.import_module(module)
    assert callable(getattr(loaded, "main", None)), f"{module} has no main()"
