"""`python -m bench.rag_sync`: the `rag sync` command line against a live server.

Two workloads, each timed around the real `rag` executable (a subprocess, as a script runs it):

- **incremental**: a folder of `--files` (1,000) small text files is synced once (not timed),
  then 10 of them change; `rag sync` is timed until it exits (its listing, hashing, comparison
  and the 10 uploads), then the 10 files' indexing until their jobs are done. A sync with
  nothing changed is timed too. Target: the client's part under 5 s.
- **first sync**: 240 paragraph-sized files (the folder ingest bench's) synced with `--wait`,
  against embedding the same chunk texts in full batches in this process (the floor); target
  within 2x, the same measure as `python -m bench.ingest --one-file-per-request`.

    python -m bench.rag_sync [--files 1000] [--changed 10] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import table
from bench.ingest_common import bench_settings, embed_once, paragraph_files
from bench.ingest_http import bench_server

REPO = Path(__file__).resolve().parents[1]
FIRST_SYNC_FILES = 240  # the folder ingest bench's paragraph files


def rag_executable(folder: Path) -> Path:
    """`rag` beside this Python (make installs it), else built offline into `folder`."""
    beside = Path(sys.executable).parent / "rag"
    if beside.exists():
        return beside
    offline = ["--quiet", "--no-deps", "--no-index", "--no-build-isolation"]
    target = ["--target", str(folder), str(REPO / "client")]
    subprocess.run([sys.executable, "-m", "pip", "install", *offline, *target], check=True)
    return folder / "bin" / "rag"


def run_rag(rag: Path, env: dict[str, str], *args: str) -> tuple[float, dict[str, object]]:
    """Seconds until `rag ... --json` exits, and its JSON summary."""
    started = time.perf_counter()
    done = subprocess.run(
        [str(rag), *args, "--json"], env=env, capture_output=True, check=False, timeout=3600
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise AssertionError(done.stderr.decode() + done.stdout.decode())
    summary: dict[str, object] = json.loads(done.stdout)
    return seconds, summary


def wait_jobs(url: str, key: str, job_ids: list[str]) -> float:
    """Seconds until every job has ended (polled every 50 ms)."""
    started = time.perf_counter()
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers) as client:
        for job_id in job_ids:
            while client.get(f"/jobs/{job_id}").json()["status"] not in ("done", "failed"):
                time.sleep(0.05)
    return time.perf_counter() - started


def small_files(folder: Path, count: int) -> list[Path]:
    """`count` small text files in a few subfolders."""
    paths = []
    for i in range(count):
        path = folder / f"part{i % 10}" / f"note-{i:04d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"Inventory note {i}: shelf {i % 37}, bin {i % 11}, {i * 3} bolts.\n")
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as raw:
        root = Path(raw)
        rag = rag_executable(root / "client")
        # The queue quota is sized for the larger of the two workloads: the first sync of the
        # paragraph files queues them faster than they are indexed.
        server = bench_server(root / "data", "use", max(args.files, FIRST_SYNC_FILES), {})
        printed = server.cli("create-key", "--username", "bench-user", "--name", "bench")
        key = next(word for word in printed.split() if word.startswith("rag_"))
        env = {**os.environ, "RAG_URL": server.url, "RAG_API_KEY": key, "HOME": str(root)}
        env["PYTHONPATH"] = str(root / "client")  # where a --target build put rag_client
        with server.running():
            folder = root / "notes"
            paths = small_files(folder, args.files)
            seconds, _ = run_rag(rag, env, "sync", str(folder), "--wait")
            rows.append([f"first sync of {args.files} small files (--wait)", seconds, ""])
            client_s, index_s, unchanged_s = [], [], []
            for round_ in range(args.rounds):
                for path in paths[: args.changed]:
                    path.write_text(path.read_text() + f"Recounted in round {round_}.\n")
                seconds, summary = run_rag(rag, env, "sync", str(folder))
                replaced = summary["replaced"]
                assert isinstance(replaced, list) and len(replaced) == args.changed, summary
                client_s.append(seconds)
                index_s.append(wait_jobs(server.url, key, [r["job_id"] for r in replaced]))
                unchanged_s.append(run_rag(rag, env, "sync", str(folder))[0])
            label = f"{args.files} files, {args.changed} changed"
            rows.append([f"{label}: listing, hashes, uploads", statistics.median(client_s), "< 5"])
            rows.append([f"{label}: their indexing", statistics.median(index_s), ""])
            rows.append([f"{args.files} files, none changed", statistics.median(unchanged_s), ""])

            first = root / "first"
            first.mkdir()
            paragraphs = paragraph_files(first, FIRST_SYNC_FILES)
            seconds, summary = run_rag(
                rag, env, "sync", str(paragraphs[0].parent), "--label", "paragraphs", "--wait"
            )
            assert not summary["failed"], summary
        floor, _, chunks = embed_once(bench_settings(root / "floor", "use"), paragraphs)
        rows.append(
            [
                f"{FIRST_SYNC_FILES} paragraph files, first sync (--wait)",
                seconds,
                f"{seconds / floor:.2f}x",
            ]
        )
        rows.append([f"  floor: embed their {chunks} chunks in batches", floor, "1.00x"])
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(table(["workload", "seconds", "target / vs floor"], rows))


if __name__ == "__main__":
    main()
