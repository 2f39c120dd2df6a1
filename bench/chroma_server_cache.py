"""Does the Chroma server's HNSW cache bound its memory? (issue #29, bench/README.md "Many tenants")

Starts `chroma run` with a config file whose `segment_manager.hnsw_index_pool_cache_config`
holds at most CAPACITY collections (0: no config file, the server's default of 65,536), creates
COLLECTIONS collections of 8 vectors each (written twice, so each index is persisted), queries
each, then queries every one again (each evicted meanwhile when CAPACITY is smaller) and checks
it answers. Prints the server's RSS growth per collection.

    python -m bench.chroma_server_cache CAPACITY COLLECTIONS
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
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        server = start_server(Path(tmp), capacity, port)
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
            start = rss_mb(server.pid)
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
        f"capacity={capacity or 'default'} collections={count}: server RSS {start:.0f} -> "
        f"{filled:.0f} MB ({(filled - start) / count:.2f} MB per collection); "
        f"{answered}/{count} answered again; load average {os.getloadavg()}"
    )


if __name__ == "__main__":
    main()
