"""`python -m bench.scaleout`: API throughput with 1 vs 2 API processes, ingestion throughput
with 1 vs 2 worker processes, on the scale-out stack (Chroma server, Redis, PostgreSQL).

The stack is the one the integration test starts (testkit/local_stack.py): real
processes, `use` embedder, `extractive` LLM (so /query measures the service, not an LLM).

- `/query` (cache hits): one question asked over and over; every request after the first is
  answered from the shared Redis cache, so this measures auth + cache + HTTP per process.
- `/search`: rotating queries (no cache): embed + Chroma query + keyword index per request.
- ingestion: N files uploaded at once, wall time until every job is done.

The load generator runs on the same machine, in this process, and takes CPU from the servers;
on 2 cores that is part of what the ratios show.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import median, percentile, table
from bench.load import RouteStats, run_phase
from testkit.local_stack import PASSWORD, ApiClient, LocalStack, Process

QUESTION = "Which team checked the pump in bay 12, and which code was logged?"
SEARCHES = [
    "pump in bay 12",
    "valve checked by team 3",
    "code R004242",
    "filter maintenance records",
    "gauge logged with code",
    "sensor in bay 40 team 7",
    "motor inspection",
    "seal replaced bay 9",
]


def corpus_file(index: int, records: int) -> bytes:
    """A text file of distinct maintenance records (every chunk different)."""
    parts = ["pump", "valve", "filter", "gauge", "sensor", "motor", "seal"]
    lines = [
        f"File {index} record {i:05d}: the {parts[i % 7]} in bay {i % 97} was checked by team "
        f"{i % 13} and logged with code R{(i * 7919 + index) % 100003:06d}."
        for i in range(records)
    ]
    return "\n".join(lines).encode()


def run_load(
    base_url: str, token: str, path: str, bodies: list[dict[str, object]], requests: int, users: int
) -> RouteStats:
    """`requests` POSTs from `users` concurrent clients, with bench.load's client code."""
    headers = {"Authorization": f"Bearer {token}"}

    async def call(client: httpx.AsyncClient, number: int) -> httpx.Response:
        return await client.post(path, json=bodies[number % len(bodies)], headers=headers)

    async def phase() -> RouteStats:
        limits = httpx.Limits(max_connections=users)
        async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as client:
            return await run_phase(client, call, requests, users)

    return asyncio.run(phase())


def wait_all_processes(stack: LocalStack, api: Process, checks: int = 30) -> None:
    """Ready, and answering on fresh connections many times (so every uvicorn worker is up)."""
    stack.wait_ready(api)
    ok = 0
    while ok < checks:
        response = httpx.get(api.url + "/ready", timeout=5)
        ok = ok + 1 if response.status_code == 200 else 0
        time.sleep(0.05)


def ingest(stack: LocalStack, client: ApiClient, files: int, records: int, tag: str) -> float:
    """Upload `files` files at once; seconds until all their jobs are done."""
    started = time.perf_counter()
    jobs = []
    for i in range(files):
        job = client.upload(f"{tag}-{i}.txt", corpus_file(i, records))
        stack.job_ids.add(job["job_id"])
        jobs.append(job["job_id"])
    for job_id in jobs:
        done = client.wait_job(job_id, timeout_s=1800)
        if done["status"] != "done":
            raise RuntimeError(f"job failed: {done}")
    return time.perf_counter() - started


def main() -> None:
    """Run both comparisons and print the tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.scaleout")
    parser.add_argument("--requests", type=int, default=400, help="per load run")
    parser.add_argument("--users", type=int, default=8, help="concurrent clients")
    parser.add_argument("--files", type=int, default=6, help="files per ingestion run")
    parser.add_argument("--records", type=int, default=400, help="records per file (~0.5 chunk)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-scaleout-"))
    stack = LocalStack(
        root,
        settings={
            "RAG_RATE_LIMIT_QUERY_PER_MINUTE": "1000000",
            "RAG_QUOTA_QUEUED_JOBS": "64",
            "RAG_CHUNK_SIZE": "300",
            "RAG_CHUNK_OVERLAP": "50",
        },
    )
    print(f"load average before: {os.getloadavg()}")
    try:
        stack.start_backends()
        stack.create_user("bench", "bench-user")

        # --- ingestion: 1 vs 2 workers (one API process takes the uploads) ---
        api = stack.start_api("api-ingest")
        workers = [stack.start_worker("w1")]
        wait_all_processes(stack, api)
        stack.wait_worker_ready(workers[0])
        client = ApiClient(api.url)
        client.login("bench-user", PASSWORD)
        ingest(stack, client, 1, 50, "warmup")  # first collection, first keyword index
        one = ingest(stack, client, args.files, args.records, "one")
        workers.append(stack.start_worker("w2"))
        stack.wait_worker_ready(workers[1])
        two = ingest(stack, client, args.files, args.records, "two")
        chunks = client.get("/stats").json()["chunks"]
        for process in [*workers, api]:
            stack.stop(process)
        rows = [
            ["1 worker", args.files, one, args.files / one, 1.0],
            ["2 workers", args.files, two, args.files / two, one / two],
        ]
        print(f"\ningestion ({args.files} files x ~{args.records // 2} chunks; {chunks} in store)")
        print(table(["workers", "files", "wall s", "files/s", "ratio"], rows))

        # --- API: 1 vs 2 uvicorn processes, cache-hit /query and /search ---
        results: dict[tuple[str, int], RouteStats] = {}
        for processes in (1, 2):
            api = stack.start_api(f"api-x{processes}", workers=processes)
            wait_all_processes(stack, api)
            token = ApiClient(api.url).login("bench-user", PASSWORD)
            query_body: list[dict[str, object]] = [{"question": QUESTION}]
            search_bodies: list[dict[str, object]] = [{"query": q} for q in SEARCHES]
            run_load(api.url, token, "/query", query_body, 50, args.users)  # warm up, fill cache
            run_load(api.url, token, "/search", search_bodies, 50, args.users)
            for path, bodies in (("/query", query_body), ("/search", search_bodies)):
                results[(path, processes)] = run_load(
                    api.url, token, path, bodies, args.requests, args.users
                )
            stack.stop(api)
        rows = []
        for path in ("/query", "/search"):
            base = results[(path, 1)].ok / results[(path, 1)].seconds
            for processes in (1, 2):
                r = results[(path, processes)]
                errors = r.client_errors + r.server_errors + r.transport_errors
                rows.append(
                    [
                        f"{path} ({'cache hit' if path == '/query' else 'no cache'})",
                        processes,
                        r.ok,
                        errors,
                        r.ok / r.seconds,
                        median(r.latencies_ms),
                        percentile(r.latencies_ms, 95),
                        r.ok / r.seconds / base,
                    ]
                )
        print(f"\nAPI ({args.users} concurrent clients, {args.requests} requests per run)")
        headers = ["workload", "API procs", "requests", "errors", "req/s", "p50 ms", "p95 ms"]
        print(table([*headers, "ratio"], rows))
        print(f"\nload average after: {os.getloadavg()}; cores: {os.cpu_count()}")
    finally:
        leftovers = stack.close()
        if leftovers:
            print(f"warning: Redis keys left behind: {leftovers[:5]}")


if __name__ == "__main__":
    main()
