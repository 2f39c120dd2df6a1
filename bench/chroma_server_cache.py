"""Does the Chroma server's HNSW cache bound its memory? (bench/README.md "Many tenants")

Starts `chroma run` with a config file whose `segment_manager.hnsw_index_pool_cache_config`
holds at most CAPACITY collections (0: no config file, the server's default of 65,536), creates
COLLECTIONS collections of 8 vectors each (written twice, so each index is persisted), queries
each, then queries every one again (each evicted meanwhile when CAPACITY is smaller) and checks
it answers. Prints the server's RSS growth per collection.

    python -m bench.chroma_server_cache CAPACITY COLLECTIONS [--python-server]

`--python-server` runs the server the compose chroma image runs instead: chromadb's Python
server (`uvicorn chromadb.app:app`) with `docker/chroma/bounded_cache.py` bounding the same cache
to CAPACITY collections (0: chromadb's own sizing, RLIMIT_NOFILE // 5).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import chromadb


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


IMAGE_CONTEXT = Path(__file__).resolve().parents[1] / "docker" / "chroma"


def start_python_server(root: Path, capacity: int, port: int) -> subprocess.Popen[bytes]:
    """The compose image's server: chromadb's Python server, its cache bounded when capacity>0."""
    env = {**os.environ, "IS_PERSISTENT": "TRUE", "PERSIST_DIRECTORY": str(root / "chroma")}
    if capacity:
        env["PYTHONPATH"] = str(IMAGE_CONTEXT)
        env["CHROMA_API_IMPL"] = "bounded_cache.BoundedCacheAPI"
        env["CHROMA_HNSW_CACHE_COLLECTIONS"] = str(capacity)
    argv = [sys.executable, "-m", "uvicorn", "chromadb.app:app", "--port", str(port)]
    log = (root / "server.log").open("wb")
    return subprocess.Popen(argv, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)


def start_server(root: Path, capacity: int, port: int) -> subprocess.Popen[bytes]:
    chroma = str(Path(sys.executable).parent / "chroma")
    path = root / "chroma"
    if not capacity:
        argv = [chroma, "run", "--path", str(path), "--port", str(port)]
    else:
        config = root / "chroma.yaml"
        config.write_text(
            f'persist_path: "{path}"\nport: {port}\nlisten_address: "127.0.0.1"\n'
            "segment_manager:\n  hnsw_index_pool_cache_config:\n    memory:\n"
            f"      capacity: {capacity}\n"
        )
        argv = [chroma, "run", str(config)]
    log = (root / "server.log").open("wb")
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def main() -> None:
    capacity, count = int(sys.argv[1]), int(sys.argv[2])
    python_server = "--python-server" in sys.argv[3:]
    start = start_python_server if python_server else start_server
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        server = start(Path(tmp), capacity, port)
        try:
            client = None
            for _ in range(120):
                try:
                    client = chromadb.HttpClient(host="127.0.0.1", port=port)
                    client.heartbeat()
                    break
                except Exception:
                    time.sleep(0.5)
            assert client is not None
            rng = np.random.default_rng(0)
            before = rss_mb(server.pid)
            config = {"hnsw": {"space": "cosine", "sync_threshold": 2}}
            for n in range(count):
                collection = client.create_collection(f"tenant{n}", configuration=config)  # type: ignore[arg-type]
                vectors = rng.standard_normal((8, 512)).astype(np.float32)
                ids = [str(i) for i in range(8)]
                collection.upsert(ids=ids, embeddings=vectors)
                collection.upsert(ids=ids, embeddings=vectors)
                collection.query(query_embeddings=vectors[:1], n_results=3)
            filled = rss_mb(server.pid)
            answered = sum(
                len(
                    client.get_collection(f"tenant{n}").query(
                        query_embeddings=rng.standard_normal((1, 512)).astype(np.float32),
                        n_results=3,
                    )["ids"][0]
                )
                == 3
                for n in range(count)
            )
        finally:
            server.terminate()
            server.wait()
    print(
        f"{'python server ' if python_server else ''}capacity={capacity or 'default'} "
        f"collections={count}: server RSS {before:.0f} -> "
        f"{filled:.0f} MB ({(filled - before) / count:.2f} MB per collection); "
        f"{answered}/{count} answered again; load average {os.getloadavg()}"
    )


if __name__ == "__main__":
    main()
