"""A big tenant survives a restart: one process writes 30,000 chunks into the
embedded stores (real XQuAD sentences; vectors are the shipped `use` model's vectors of 300 of
them plus noise, as bench.big_tenant does, so writing fits a test's time) and builds the keyword
index; then new processes (`python -m app.cli search`) open the same data directory.

They must return the same passages in the same order, with the keyword arm taking part, and
the keyword index must be loaded from disk: a rebuild would write a new snapshot folder and
pointer, so the folder listing and the pointer stay as the first process left them. The full
curve (10k / 100k / 1M chunks, with timings) is `python -m bench.big_tenant`, bench/README.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.availability import unavailable

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
CHUNKS = 30_000
QUESTIONS = 3


def stack_env(data: Path) -> dict[str, str]:
    """The environment both the writer and the restarted processes run with."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAG_")}
    env.update(
        {
            "PYTHONPATH": str(REPO),
            "HF_HUB_OFFLINE": "1",
            "ANONYMIZED_TELEMETRY": "False",
            "RAG_DATA_DIR": str(data),
            "RAG_EMBEDDING_PROVIDER": "use",
            "RAG_RERANKER": "none",
            "RAG_QUOTA_CHUNKS": str(10 * CHUNKS),
        }
    )
    if "RAG_EVAL_DATA_DIR" in os.environ:
        env["RAG_EVAL_DATA_DIR"] = os.environ["RAG_EVAL_DATA_DIR"]
    return env


def run(args: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=500
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def keyword_files(data: Path) -> dict[str, str]:
    """Every file under the keyword index directory with its size and modification time."""
    root = data / "keyword"
    return {
        str(path.relative_to(root)): f"{path.stat().st_size}:{path.stat().st_mtime_ns}"
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_a_restarted_process_finds_the_same_passages_and_loads_the_keyword_index(
    tmp_path: Path,
) -> None:
    try:
        from bench.tokenizer_ablation import datasets

        questions = [q for q, _ in datasets()[0].questions][:QUESTIONS]
    except FileNotFoundError as exc:
        unavailable(f"eval data missing: {exc}")
    data = tmp_path / "data"
    env = stack_env(data)
    out = run(
        ["bench.big_tenant", "--write", str(data), str(CHUNKS), json.dumps(questions)],
        env,
        tmp_path,
    )
    before = json.loads(out.strip().splitlines()[-1])
    on_disk = keyword_files(data)
    assert any(name.endswith("current.json") for name in on_disk), on_disk  # it was persisted

    for question, expected in zip(questions, before["hybrid_ids"], strict=True):
        out = run(
            ["app.cli", "search", "--tenant", "big", "-k", "5", "--json", question], env, tmp_path
        )
        rows = json.loads(out)
        assert [[row["document_id"], row["text"]] for row in rows] == expected
        assert any(row["stages"].get("keyword_rank") is not None for row in rows), rows

    assert keyword_files(data) == on_disk  # loaded, not rebuilt (nor rewritten)
