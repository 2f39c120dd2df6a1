"""Load on a live server: bounded concurrent clients for uploads, /search, /query (misses, with
the `extractive` LLM) and cache-hit /query, over HTTP on loopback.

The server is `python -m app.serve` (uvicorn, one process) on a temp data dir with the `use`
embedder. Before it starts, `--chunks` chunks are written straight into that data dir's Chroma
store for the searched tenant (real XQuAD sentences recombined into ~120-word chunks; vectors:
real `use` vectors for 300 of them, the rest those plus noise, as bench.retrieval does), so
/search runs against a 10k-chunk tenant without minutes of embedding. Abuse limits are raised
so that the load is measured, not the rate limiter (answer slots: one per client). The client
runs in this process (asyncio + httpx) and shares the 2 cores with the server.

    python -m bench.load [--chunks 10000] [--concurrency 8] [--scale 1.0] [--set RAG_X=value]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing
import os
import random
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from bench.common import add_server_setting_option, median, percentile, server_settings_given, table
from testkit.live_server import LiveServer

SEARCH_TENANT = "bench-tenant"  # the tenant bench.retrieval's loader writes
UPLOAD_TENANT = "bench-uploads"
PASSWORD = "bench password, long enough"
TARGET_HIT_P50_MS = 10.0
TARGET_SEARCH_P50_MS = 100.0


def preload(data_dir: str, chunks: int) -> None:
    """Write `chunks` chunks for SEARCH_TENANT into the data dir (run in a child process)."""
    from app.config import load_settings
    from app.providers.embeddings import build_embedder
    from bench.bm25_libraries import synthetic_chunks
    from bench.retrieval import _load
    from testkit.indexing import build_corpus

    settings = load_settings(_env_file=None, data_dir=Path(data_dir), embedding_provider="use")
    embedder = build_embedder(settings)
    _load(build_corpus(settings, embedder), embedder, synthetic_chunks(chunks))


def questions(count: int, seed: int = 11) -> list[str]:
    """Real XQuAD/ARCD questions (English and Arabic), shuffled."""
    from bench.tokenizer_ablation import datasets

    pool = [q for ds in datasets() for q, _ in ds.questions]
    random.Random(seed).shuffle(pool)
    return pool[:count]


@dataclass
class RouteStats:
    """Latencies and outcomes of one phase's requests."""

    latencies_ms: list[float] = field(default_factory=list)
    ok: int = 0
    client_errors: int = 0
    server_errors: int = 0
    transport_errors: int = 0
    seconds: float = 0.0
    server_ms: list[float] = field(default_factory=list)  # the response's own total_ms
    stages: dict[str, list[float]] = field(default_factory=dict)

    def record_timings(self, response: httpx.Response) -> None:
        """Keep the server-side stage timings a /search or /query body reports."""
        if response.status_code != 200 or "json" not in response.headers.get("content-type", ""):
            return
        body = response.json()
        if "total_ms" in body:
            self.server_ms.append(body["total_ms"])
            for name, ms in body["timings"].items():
                self.stages.setdefault(name, []).append(ms)

    def record(self, status: int | None, ms: float) -> None:
        """Count one request by its outcome."""
        self.latencies_ms.append(ms)
        if status is None:
            self.transport_errors += 1
        elif status >= 500:
            self.server_errors += 1
        elif status >= 400:
            self.client_errors += 1
        else:
            self.ok += 1


Call = Callable[[httpx.AsyncClient, int], Awaitable[httpx.Response]]


async def run_phase(
    client: httpx.AsyncClient, call: Call, requests: int, workers: int
) -> RouteStats:
    """`requests` calls by `workers` concurrent clients, each taking the next request number."""
    stats = RouteStats()
    counter = iter(range(requests))

    async def worker() -> None:
        for number in counter:
            started = time.perf_counter()
            try:
                response = await call(client, number)
                status: int | None = response.status_code
            except httpx.TransportError:
                status = None
            stats.record(status, (time.perf_counter() - started) * 1000)
            if status is not None:
                stats.record_timings(response)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    stats.seconds = time.perf_counter() - began
    return stats


def upload_body(number: int) -> bytes:
    """A small distinct text document (2-3 chunks)."""
    return "\n\n".join(
        f"Upload {number} note {i}: the freight lift in block {number % 17} was serviced by crew "
        f"{i} and passed load test {number * 31 + i} with a margin of {i + 3} percent."
        for i in range(12)
    ).encode()


async def wait_jobs(client: httpx.AsyncClient, headers: dict[str, str], ids: list[str]) -> int:
    """Poll until every job has ended; returns how many failed."""
    pending, failed = set(ids), 0
    while pending:
        for job_id in list(pending):
            job = (await client.get(f"/jobs/{job_id}", headers=headers)).json()
            if job["status"] in ("done", "failed"):
                pending.discard(job_id)
                failed += job["status"] == "failed"
        await asyncio.sleep(0.2)
    return failed


async def measure(server: LiveServer, chunks: int, concurrency: int, scale: float) -> None:
    def n(count: int) -> int:
        return max(1, int(count * scale))

    limits = httpx.Limits(max_connections=concurrency * 4)
    async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:

        async def login(username: str) -> dict[str, str]:
            form = {"username": username, "password": PASSWORD}
            token = (await client.post("/auth/token", data=form)).json()["access_token"]
            return {"Authorization": f"Bearer {token}"}

        reader, uploader = await login("bench-reader"), await login("bench-uploader")
        stored = (await client.get("/stats", headers=reader)).json()["chunks"]
        started = time.perf_counter()
        await client.post("/search", json={"query": "warm up"}, headers=reader)
        first_search_s = time.perf_counter() - started
        qs = questions(n(400) + n(60) + 50)
        misses, hits = qs[: n(400)], qs[n(400) : n(400) + 20]
        for question in hits:  # warm the cache
            await client.post("/query", json={"question": question}, headers=reader)

        def search(c: httpx.AsyncClient, i: int) -> Awaitable[httpx.Response]:
            return c.post("/search", json={"query": qs[i % len(qs)]}, headers=reader)

        def miss(offset: int) -> Call:
            def call(c: httpx.AsyncClient, i: int) -> Awaitable[httpx.Response]:
                return c.post(
                    "/query", json={"question": misses[(offset + i) % len(misses)]}, headers=reader
                )

            return call

        def hit(c: httpx.AsyncClient, i: int) -> Awaitable[httpx.Response]:
            return c.post("/query", json={"question": hits[i % len(hits)]}, headers=reader)

        job_ids: list[str] = []
        upload_numbers = itertools.count()

        async def upload(c: httpx.AsyncClient, i: int) -> httpx.Response:
            number = next(upload_numbers)  # a new file name each time: no replacements
            files = {"file": (f"upload-{number:05d}.txt", upload_body(number))}
            response = await c.post("/documents", files=files, headers=uploader)
            if response.status_code == 202:
                job_ids.append(response.json()["job_id"])
            return response

        phases: list[tuple[str, str, Call, int, int]] = [
            ("latency", "/search", search, n(100), 1),
            ("latency", "/query (cache hit)", hit, n(200), 1),
            ("latency", "/query (miss)", miss(0), n(60), 1),
            ("throughput", "/search", search, n(300), concurrency),
            ("throughput", "/query (cache hit)", hit, n(600), concurrency),
            ("throughput", "/query (miss)", miss(n(60)), n(200), concurrency),
            ("throughput", "POST /documents", upload, n(40), max(1, concurrency // 2)),
        ]
        rows = []
        results: dict[tuple[str, str], RouteStats] = {}
        for phase, route, call, count, workers in phases:
            stats = await run_phase(client, call, count, workers)
            results[(phase, route)] = stats
            rows.append(_row(phase, route, workers, stats))
        ingest_started = time.perf_counter()
        failed_jobs = await wait_jobs(client, uploader, job_ids)
        ingest_s = time.perf_counter() - ingest_started

        # Everything at once: uploads being embedded while queries and searches are served.
        mixed_calls: list[tuple[str, Call, int]] = [
            ("/search", search, n(150)),
            ("/query (cache hit)", hit, n(300)),
            ("/query (miss)", miss(n(260)), n(100)),
            ("POST /documents", upload, n(20)),
        ]
        workers = max(1, concurrency // len(mixed_calls))
        mixed = await asyncio.gather(
            *(run_phase(client, call, count, workers) for _, call, count in mixed_calls)
        )
        for (route, _, _), stats in zip(mixed_calls, mixed, strict=True):
            rows.append(_row("mixed", route, workers, stats))
        failed_jobs += await wait_jobs(client, uploader, job_ids)

    print(
        f"\nserver: {server.url}; searched tenant: {stored} chunks (preloaded into the data "
        f"dir); first /search (keyword index build) {first_search_s * 1000:.0f} ms"
    )
    print(
        table(
            [
                "phase",
                "route",
                "clients",
                "requests",
                "2xx",
                "4xx",
                "5xx",
                "transport err",
                "req/s",
                "p50 ms",
                "p95 ms",
                "max ms",
            ],
            rows,
        )
    )
    print(
        f"\nuploads: {len(job_ids)} jobs, {failed_jobs} failed; after the throughput phase the "
        f"last jobs finished {ingest_s:.1f} s later"
    )
    print("\nserver-side medians (ms) of the 1-client phases, from the responses' timings:")
    stage_rows = []
    names = ("embed_query", "dense", "keyword", "fuse", "generate", "cache")
    for route in ("/search", "/query (cache hit)", "/query (miss)"):
        stats = results[("latency", route)]
        stage_rows.append(
            [route, round(median(stats.latencies_ms), 1), round(median(stats.server_ms), 1)]
            + [round(median(stats.stages.get(name, [])), 2) for name in names]
        )
    print(table(["route", "client p50", "server total", *names], stage_rows))
    all_5xx = sum(row[6] for row in rows)  # type: ignore[misc]
    hit_p50 = percentile(results[("latency", "/query (cache hit)")].latencies_ms, 50)
    search_p50 = percentile(results[("latency", "/search")].latencies_ms, 50)
    print(f"5xx responses: {all_5xx} (target 0)")
    print(f"cache-hit /query p50 (1 client): {hit_p50:.1f} ms (target <= {TARGET_HIT_P50_MS:g})")
    print(
        f"/search p50 at {stored} chunks (1 client): {search_p50:.1f} ms "
        f"(target <= {TARGET_SEARCH_P50_MS:g})"
    )


def _row(phase: str, route: str, workers: int, stats: RouteStats) -> list[object]:
    ms = stats.latencies_ms
    return [
        phase,
        route,
        workers,
        len(ms),
        stats.ok,
        stats.client_errors,
        stats.server_errors,
        stats.transport_errors,
        round(len(ms) / stats.seconds, 1),
        round(percentile(ms, 50), 1),
        round(percentile(ms, 95), 1),
        round(max(ms), 1),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply request counts")
    add_server_setting_option(parser, "RAG_EMBEDDING_THREADS=1")
    args = parser.parse_args()
    extra = server_settings_given(args.set)

    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(
            Path(tmp) / "data",
            {
                "RAG_LOG_LEVEL": "INFO",
                "RAG_RATE_LIMIT_QUERY_PER_MINUTE": str(10**9),
                # The extractive "model" answers concurrently; bound it by the clients, not 1.
                "RAG_ANSWER_MAX_CONCURRENT": str(args.concurrency),
                "RAG_ANSWER_MAX_PER_TENANT": str(args.concurrency),
                "RAG_ANSWER_MAX_PER_USER": str(args.concurrency),
                "RAG_RATE_LIMIT_AUTH_PER_MINUTE": "1000",
                "RAG_QUOTA_QUEUED_JOBS": str(10**6),
                **extra,
            },
        )
        started = time.perf_counter()
        child = multiprocessing.get_context("spawn").Process(
            target=preload, args=(str(server.data_dir), args.chunks)
        )
        child.start()
        child.join()
        assert child.exitcode == 0, "preloading the store failed"
        print(f"preloaded {args.chunks} chunks in {time.perf_counter() - started:.1f} s")
        print(f"server settings beyond the defaults: {server.env_overrides}")
        for tenant, user in ((SEARCH_TENANT, "bench-reader"), (UPLOAD_TENANT, "bench-uploader")):
            server.cli(
                "create-user",
                "--tenant",
                tenant,
                "--username",
                user,
                "--password-stdin",
                stdin=PASSWORD + "\n",
            )
        with server.running():
            asyncio.run(measure(server, args.chunks, args.concurrency, args.scale))


if __name__ == "__main__":
    main()
