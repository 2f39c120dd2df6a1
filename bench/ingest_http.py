"""`python -m bench.ingest --one-file-per-request`: a folder synced to a live server, one file
per HTTP request, several requests at once, against embedding the same texts in one batch.

Each round starts `python -m app.serve` (uvicorn, one process, the threads job backend with its
default pool, real Chroma and embedder) on a fresh data directory, creates a user with the CLI,
logs in, and posts the files with `concurrency` clients, each file in its own request (or
`per_request` files in one request: the multi-file workload), then
polls the tenant's job listing (`GET /jobs?status=queued&status=processing`) until nothing is
left to index. Two clocks run from the first upload: until the last job's record says `done`
(its `updated_at`, the server's clock on this machine: when ingestion finished) and until the
client has seen that (its polling included). Every job is then checked done, every document
listed and searchable.
The floor embeds the uploads' chunk texts in full batches in this process while no server runs.
Rounds interleave the two; the load average is printed with the times.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx

from bench.common import percentile, process_cpu_s, table
from bench.ingest_common import (
    POLL_S,
    UPLOAD_HEADERS,
    bench_settings,
    embed_once,
    paragraph_files,
    upload_row,
)
from testkit.live_server import LiveServer

PASSWORD = "bench password, long enough"
TENANT = "bench-folder"
NEIGHBOUR = "bench-neighbour"  # --probe-search: another tenant searching during the sync
PROBE_PAUSE_S = 0.05


async def _login(client: httpx.AsyncClient, username: str) -> dict[str, str]:
    form = {"username": username, "password": PASSWORD}
    token = (await client.post("/auth/token", data=form)).json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


async def _wait_done(client: httpx.AsyncClient, headers: dict[str, str], job_id: str) -> None:
    """Poll one job until it is done."""
    while True:
        job = (await client.get(f"/jobs/{job_id}", headers=headers)).json()
        if job["status"] == "failed":
            raise AssertionError(job)
        if job["status"] == "done":
            return
        await asyncio.sleep(POLL_S)


async def _wait_all_done(client: httpx.AsyncClient, headers: dict[str, str]) -> None:
    """Poll the tenant's job listing until none is left to index."""
    pending = "/jobs?status=queued&status=processing&limit=1"
    while (await client.get(pending, headers=headers)).json()["count"]:
        await asyncio.sleep(POLL_S)


async def _last_done_at(client: httpx.AsyncClient, headers: dict[str, str], jobs: int) -> float:
    """When the last of the tenant's `jobs` jobs was done, by the job records (epoch seconds);
    AssertionError unless all of them are done."""
    done: list[float] = []
    while len(done) < jobs:
        listing = f"/jobs?status=done&limit=100&offset={len(done)}"
        page = (await client.get(listing, headers=headers)).json()
        assert page["count"] == jobs and page["data"], page
        done += [datetime.fromisoformat(job["updated_at"]).timestamp() for job in page["data"]]
    return max(done)


async def _neighbour_ready(client: httpx.AsyncClient, document: Path) -> dict[str, str]:
    """The neighbour's one document, indexed before the sync starts; its auth headers."""
    headers = await _login(client, "neighbour-user")
    files = {"file": (document.name, document.read_bytes(), "text/plain")}
    response = await client.post("/documents", files=files, headers=headers)
    assert response.status_code == 202, response.text
    await _wait_done(client, headers, response.json()["job_id"])
    return headers


async def _probe_search(
    client: httpx.AsyncClient, headers: dict[str, str], query: str, stop: asyncio.Event
) -> list[float]:
    """The neighbour's /search latencies (ms), one every PROBE_PAUSE_S, until `stop`."""
    latencies = []
    while not stop.is_set():
        started = time.perf_counter()
        response = await client.post("/search", json={"query": query}, headers=headers)
        latencies.append(1000 * (time.perf_counter() - started))
        assert response.status_code == 200 and response.json()["results"], response.text
        await asyncio.sleep(PROBE_PAUSE_S)
    return latencies


async def _sync_folder(
    server: LiveServer,
    paths: list[Path],
    concurrency: int,
    probe: Path | None = None,
    per_request: int = 1,
) -> tuple[dict[str, float], list[float]]:
    """Post `paths` `per_request` at a time with `concurrency` clients and wait for every job; with
    `probe`, the neighbour tenant (its one document `probe`) searches all the while: the phase
    timings and the neighbour's /search latencies in ms."""
    limits = httpx.Limits(max_connections=concurrency + 3)
    async with httpx.AsyncClient(base_url=server.url, timeout=300, limits=limits) as client:
        headers = await _login(client, "bench-user")
        stop = asyncio.Event()
        probing = None
        if probe is not None:
            neighbour = await _neighbour_ready(client, probe)
            query = probe.read_text(encoding="utf-8")[:80]
            probing = asyncio.create_task(_probe_search(client, neighbour, query, stop))
        todo = list(paths)
        posted: list[float] = []  # when each client had posted its last file

        async def client_loop() -> None:
            while todo:
                group, todo[:per_request] = todo[:per_request], []
                files = [("file", (p.name, p.read_bytes(), "text/plain")) for p in group]
                response = await client.post("/documents", files=files, headers=headers)
                assert response.status_code == 202, response.text
            posted.append(time.perf_counter())

        assert server.process is not None
        pid = server.process.pid
        started, started_epoch = time.perf_counter(), time.time()
        cpu_started = process_cpu_s(pid)
        await asyncio.gather(*(client_loop() for _ in range(concurrency)))
        await _wait_all_done(client, headers)
        seen, cpu_finished = time.perf_counter(), process_cpu_s(pid)
        last_done = await _last_done_at(client, headers, len(paths))
        stop.set()
        probed = await probing if probing is not None else []
        stats = (await client.get("/stats", headers=headers)).json()
        assert stats["documents"] == len(paths), stats
        found = await client.post(
            "/search", json={"query": paths[0].read_text()[:80]}, headers=headers
        )
        assert found.status_code == 200 and found.json()["results"], found.text
    timings = {
        "uploads": max(posted) - started,
        "total": last_done - started_epoch,
        "seen": seen - started,
        "cpu": cpu_finished - cpu_started,
        "chunks": stats["chunks"],
    }
    return timings, probed


def bench_server_settings(provider: str, uploads: int, extra: dict[str, str]) -> dict[str, str]:
    """The server settings of an upload bench: the embedder, and the queue quota and the auth
    rate opened up for `uploads` files; `extra` on top."""
    return {
        "RAG_EMBEDDING_PROVIDER": provider,
        "RAG_QUOTA_QUEUED_JOBS": str(10 * uploads),
        "RAG_RATE_LIMIT_AUTH_PER_MINUTE": "1000",
        **extra,
    }


def bench_server(data: Path, provider: str, uploads: int, extra: dict[str, str]) -> LiveServer:
    """A live server for `uploads` files (`bench_server_settings`) with the bench user made;
    not started."""
    server = LiveServer(data, bench_server_settings(provider, uploads, extra))
    server.create_user(TENANT, "bench-user", PASSWORD)
    return server


def run_http_workload(
    uploads: int,
    provider: str,
    concurrency: int,
    rounds: int,
    extra: dict[str, str],
    probe_search: bool = False,
    per_request: int = 1,
) -> None:
    """Print the one-file-per-request table (`per_request` files in each request instead, if
    given; medians over `rounds`) and the ratio to the floor; with `probe_search`, also a
    neighbour tenant's /search latency during the syncs."""
    runs: list[dict[str, float]] = []
    probed: list[float] = []
    floors: list[float] = []
    floor_cpus: list[float] = []
    loads: list[float] = []
    chunks = 0
    with tempfile.TemporaryDirectory() as tmp:
        paths = paragraph_files(Path(tmp), uploads)
        for round_number in range(rounds):
            base = Path(tmp) / f"round{round_number}"
            base.mkdir()
            loads.append(os.getloadavg()[0])
            wall, cpu, chunks = embed_once(bench_settings(base / "embed", provider), paths)
            floors.append(wall)
            floor_cpus.append(cpu)
            server = bench_server(base / "data", provider, uploads, extra)
            if probe_search:
                server.create_user(NEIGHBOUR, "neighbour-user", PASSWORD)
            with server.running():
                probe = (base / "neighbour.txt") if probe_search else None
                if probe is not None:
                    probe.write_text(paths[-1].read_text(encoding="utf-8"), encoding="utf-8")
                timings, latencies = asyncio.run(
                    _sync_folder(server, paths, concurrency, probe, per_request)
                )
                runs.append(timings)
                probed += latencies
            loads.append(os.getloadavg()[0])
    total = statistics.median(r["total"] for r in runs)
    floor = statistics.median(floors)
    floor_cpu = statistics.median(floor_cpus)
    workload = "one file per request" if per_request == 1 else f"{per_request} files per request"
    print(
        f"{uploads} uploads (one XQuAD paragraph each, {chunks} chunks), {workload}, "
        f"{concurrency} at once, live server; embedder {provider}; settings beyond the defaults: "
        f"{extra or 'none'}; median of {rounds} round(s); load average (1 min) "
        f"{min(loads):.1f}-{max(loads):.1f}"
    )
    rows = [
        upload_row(workload, runs, uploads, floor, floor_cpu),
        ["one-batch embedding (floor)", "-", floor, floor_cpu, uploads / floor, "1x", "1x"],
    ]
    print(table(UPLOAD_HEADERS, rows))
    print(
        "per round (total s, floor s): "
        + ", ".join(f"({r['total']:.2f}, {f:.2f})" for r, f in zip(runs, floors, strict=True))
    )
    ratios = [r["total"] / f for r, f in zip(runs, floors, strict=True)]
    print(
        f"ratio to one-batch embedding: {total / floor:.2f}x of the medians, "
        f"{statistics.median(ratios):.2f}x median of the rounds' own ratios (target <= 2x)"
    )
    seen = statistics.median(r["seen"] for r in runs)
    print(
        f"seen done by the client (its polling included): {seen:.2f} s, "
        f"{seen / floor:.2f}x; rounds: " + ", ".join(f"{r['seen']:.2f}" for r in runs)
    )
    if probed:
        print(
            f"neighbour tenant's /search during the syncs: {len(probed)} searches, p50 "
            f"{percentile(probed, 50):.0f} ms, p95 {percentile(probed, 95):.0f} ms, max "
            f"{max(probed):.0f} ms"
        )
