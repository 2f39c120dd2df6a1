"""What recording metrics costs a request: /search latency with metrics on against off.

One live uvicorn server in this process (USE embedder, embedded Chroma, extractive model, a
small indexed manual), one client; rounds alternate on and off blocks of searches so machine
noise hits both alike. Metrics "on" is what `RAG_METRICS_ENABLED=true` does in a process (the
request counter and histogram, by route template); nothing scrapes during the timed searches.
Also the recorders alone, per call (microbenchmark). Target: p50 within 0.2 ms.

    python -m bench.metrics_overhead [--rounds 20] [--per-round 50]
"""

from __future__ import annotations

import argparse
import socket
import tempfile
import threading
import time
import timeit
from pathlib import Path

import httpx
import uvicorn

from app import metrics
from app.config import load_settings
from app.main import create_app
from bench.common import median, percentile, table

PARAGRAPHS = [
    f"Valve V-{i:03d} on deck {i % 5} is torqued to {20 + i} newton metres and inspected "
    f"every {i % 7 + 1} weeks by the deck crew."
    for i in range(200)
]


def _serve(data_dir: Path) -> tuple[uvicorn.Server, threading.Thread, str, object]:
    settings = load_settings(
        _env_file=None,
        data_dir=data_dir,
        env="development",
        jwt_secret="bench-metrics-secret-0123456789-abcdefghijklmnop",
        embedding_provider="use",
        llm_provider="extractive",
        reranker="none",
        rate_limit_query_per_minute=1_000_000,
        metrics_token="bench-scrape-token",
    )
    app = create_app(settings)
    with socket.socket() as probe:  # a free loopback port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return server, thread, f"http://127.0.0.1:{port}", app


def _searches(client: httpx.Client, count: int) -> list[float]:
    samples = []
    for i in range(count):
        started = time.perf_counter()
        response = client.post("/search", json={"query": f"valve V-{i % 200:03d} torque"})
        samples.append((time.perf_counter() - started) * 1000.0)
        response.raise_for_status()
    return samples


def _recorder_cost_us(calls: int) -> float:
    """Microseconds per request of what the middleware records (one counter, one histogram)."""
    seconds = timeit.timeit(
        lambda: metrics.http_request("/search", "POST", 200, 0.012), number=calls
    )
    return seconds / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--per-round", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server, thread, url, app = _serve(Path(tmp))
        try:
            container = app.state.container  # type: ignore[attr-defined]
            user = container.users.create_user(
                tenant_id="bench", username="bench-user", password="a long enough password"
            )
            token = container.token_codec.issue(user.id, "bench").access_token
            client = httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60
            )
            document = "\n\n".join(PARAGRAPHS).encode()
            job = client.post("/documents", files={"file": ("valves.txt", document)}).json()
            while client.get(f"/jobs/{job['job_id']}").json()["status"] not in ("done", "failed"):
                time.sleep(0.1)
            _searches(client, 100)  # warm up: keyword index, embedder, connections
            timings: dict[str, list[float]] = {"off": [], "on": []}
            for round_no in range(args.rounds):
                order = ("off", "on") if round_no % 2 == 0 else ("on", "off")
                for mode in order:
                    if mode == "on":
                        metrics.enable()
                    else:
                        metrics.disable()
                    timings[mode] += _searches(client, args.per_round)
            metrics.disable()
            off_us = _recorder_cost_us(100_000)
            metrics.enable()
            on_us = _recorder_cost_us(100_000)
            client.close()
        finally:
            metrics.disable()
            server.should_exit = True
            thread.join(30)
    rows: list[list[object]] = [
        [mode, len(ms), round(median(ms), 3), round(percentile(ms, 95), 3)]
        for mode, ms in timings.items()
    ]
    print(table(["/search, metrics", "requests", "p50 ms", "p95 ms"], rows))
    delta = median(timings["on"]) - median(timings["off"])
    print(f"\np50 on - off: {delta:+.3f} ms (target < 0.2 ms)")
    print(
        table(
            ["recorders per request", "us per call"],
            [["off (flag check)", round(off_us, 3)], ["on (counter + histogram)", round(on_us, 2)]],
        )
    )


if __name__ == "__main__":
    main()
