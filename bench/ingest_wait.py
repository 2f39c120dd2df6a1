"""`python -m bench.ingest --upload-and-wait`: clients that upload one small file, wait until its
job is done, then upload the next, against embedding the same texts in one batch; and the latency of
a lone 1 KB text upload on an idle server.

Each round starts `python -m app.serve` (uvicorn, one process, the threads job backend with its
default pool, real Chroma and embedder) on a fresh data directory, like `--one-file-per-request`.
First `LONE` lone uploads, one at a time with a pause between them (the server idle each
time): from the upload's first byte until `GET /jobs/{id}` says `done`. Then `concurrency`
clients share the `uploads` paragraph files, each posting one, waiting until its job is done,
then posting the next; timed from the first upload to the last job seen done. A client waits the
way `rag upload --wait` would, with `GET /jobs/{id}?wait=30` (the server answers when the job
ends); with `poll_ms` it polls `GET /jobs/{id}` every that many milliseconds instead, as a
script without the long poll would (the lone uploads then every `LONE_POLL_S`). The floor
embeds the same chunk texts in full batches in this process while no server runs; the server's
CPU time (its children included) is reported next to the floor's, since other jobs on a shared
machine inflate the wall clocks. Targets: lone upload p50 <= 150 ms, p95 <= 300 ms;
upload-and-wait within 2x of the floor.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.common import percentile, process_cpu_s, table
from bench.ingest_common import bench_settings, embed_once, paragraph_files
from bench.ingest_http import bench_server, bench_server_settings
from testkit.local_stack import PASSWORD as STACK_PASSWORD
from testkit.local_stack import LocalStack

PASSWORD = "bench password, long enough"
TENANT = "bench-wait"
LONE = 40  # lone uploads timed per round
LONE_PAUSE_S = 0.3  # between two lone uploads: the server is idle when each arrives
LONE_POLL_S = 0.005  # the lone uploads' polling, when the clients poll
WAIT_S = 30  # a long poll's `wait`
LONE_TEXT = ("The night crew services pump {n} on line four every ninth day. " * 16)[:1000]


async def _login(client: httpx.AsyncClient, password: str) -> dict[str, str]:
    form = {"username": "bench-user", "password": password}
    token = (await client.post("/auth/token", data=form)).json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


async def _upload_and_wait(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    name: str,
    body: bytes,
    poll_s: float | None,
) -> float:
    """Post one file and wait until its job is done (long poll, or polling every `poll_s`);
    seconds from the post to seeing it done."""
    started = time.perf_counter()
    files = {"file": (name, body, "text/plain")}
    response = await client.post("/documents", files=files, headers=headers)
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    query = "" if poll_s is not None else f"?wait={WAIT_S}"
    while True:
        job = (await client.get(f"/jobs/{job_id}{query}", headers=headers)).json()
        if job["status"] == "done":
            return time.perf_counter() - started
        assert job["status"] != "failed", job
        if poll_s is not None:
            await asyncio.sleep(poll_s)


@dataclass(frozen=True)
class Target:
    """The service under test: its URL, the bench user's password and the processes whose CPU
    is the server's (the API's, and on the scale-out stack the workers' and Chroma's)."""

    url: str
    password: str
    pids: tuple[int, ...]

    def cpu_s(self) -> float:
        return sum(process_cpu_s(pid) for pid in self.pids)


@contextlib.contextmanager
def _target(
    base: Path, provider: str, uploads: int, extra: dict[str, str], workers: int
) -> Iterator[Target]:
    """The service a round runs against, started and stopped: one `python -m app.serve` on
    embedded storage, or with `workers` the scale-out stack (API, workers, Chroma server,
    PostgreSQL, Redis)."""
    if not workers:
        server = bench_server(base / "data", provider, uploads, extra)
        with server.running():
            assert server.process is not None
            yield Target(server.url, PASSWORD, (server.process.pid,))
        return
    settings = bench_server_settings(provider, uploads, extra)
    stack = LocalStack(base / "stack", settings=settings)
    try:
        stack.start_backends()
        stack.create_user(TENANT, "bench-user")
        api = stack.start_api("api")
        started = [stack.start_worker(f"worker{n}") for n in range(workers)]
        stack.wait_ready(api)
        for worker in started:
            stack.wait_worker_ready(worker)
        pids = tuple(process.popen.pid for process in stack.processes)
        yield Target(api.url, STACK_PASSWORD, pids)
    finally:
        stack.close()


def _stack_named(workers: int) -> str:
    if not workers:
        return "live server (one process, embedded storage)"
    return (
        f"scale-out stack (one API process, {workers} worker process(es), Chroma server, "
        "PostgreSQL, Redis)"
    )


async def _round(
    target: Target, paths: list[Path], concurrency: int, poll_s: float | None
) -> dict[str, object]:
    limits = httpx.Limits(max_connections=concurrency + 2)
    async with httpx.AsyncClient(base_url=target.url, timeout=300, limits=limits) as client:
        headers = await _login(client, target.password)
        # Warm the path once (first upload loads lazily built parts), then time lone uploads.
        lone_poll_s = None if poll_s is None else LONE_POLL_S
        await _upload_and_wait(client, headers, "warm.txt", b"warm up " * 100, lone_poll_s)
        lone = []
        for n in range(LONE):
            await asyncio.sleep(LONE_PAUSE_S)
            body = LONE_TEXT.format(n=n).encode()
            lone.append(await _upload_and_wait(client, headers, f"lone{n}.txt", body, lone_poll_s))
        todo = list(paths)

        async def client_loop() -> None:
            while todo:
                path = todo.pop(0)
                await _upload_and_wait(client, headers, path.name, path.read_bytes(), poll_s)

        started, cpu_started = time.perf_counter(), target.cpu_s()
        await asyncio.gather(*(client_loop() for _ in range(concurrency)))
        total = time.perf_counter() - started
        cpu = target.cpu_s() - cpu_started
    return {"lone": lone, "total": total, "cpu": cpu}


def run_wait_workload(
    uploads: int,
    provider: str,
    concurrency: int,
    rounds: int,
    extra: dict[str, str],
    poll_ms: int = 0,
    workers: int = 0,
) -> None:
    """Print the lone-upload latency and the upload-and-wait table, medians over `rounds`; with
    `workers`, on the scale-out stack with that many worker processes."""
    lone: list[float] = []
    totals: list[float] = []
    floors: list[float] = []
    cpus: list[float] = []  # the server's (its children included) during upload-and-wait
    floor_cpus: list[float] = []
    loads: list[float] = []
    chunks = 0
    with tempfile.TemporaryDirectory() as tmp:
        paths = paragraph_files(Path(tmp), uploads)
        for round_number in range(rounds):
            base = Path(tmp) / f"round{round_number}"
            base.mkdir()
            loads.append(os.getloadavg()[0])
            wall, floor_cpu, chunks = embed_once(bench_settings(base / "embed", provider), paths)
            floors.append(wall)
            floor_cpus.append(floor_cpu)
            poll_s = poll_ms / 1000 if poll_ms > 0 else None
            with _target(base, provider, uploads, extra, workers) as target:
                result = asyncio.run(_round(target, paths, concurrency, poll_s))
            lone += result["lone"]  # type: ignore[arg-type]
            totals.append(float(result["total"]))  # type: ignore[arg-type]
            cpus.append(float(result["cpu"]))  # type: ignore[arg-type]
            loads.append(os.getloadavg()[0])
    floor = statistics.median(floors)
    total = statistics.median(totals)
    cpu, floor_cpu = statistics.median(cpus), statistics.median(floor_cpus)
    print(
        f"{uploads} uploads (one XQuAD paragraph each, {chunks} chunks), {concurrency} clients "
        f"each uploading one file and waiting for its job "
        f"({f'polling every {poll_ms} ms' if poll_ms > 0 else f'GET /jobs/{{id}}?wait={WAIT_S}'}); "
        f"{_stack_named(workers)}; embedder {provider}; "
        f"settings beyond the defaults: {extra or 'none'}; median of {rounds} round(s); load "
        f"average (1 min) {min(loads):.1f}-{max(loads):.1f}"
    )
    ms = [1000 * s for s in lone]
    print(
        table(
            ["workload", "median", "p95", "vs embedding", "CPU s", "CPU vs embedding"],
            [
                [
                    f"lone 1 KB upload until done ({len(ms)}), ms",
                    statistics.median(ms),
                    percentile(ms, 95),
                    "-",
                    "-",
                    "-",
                ],
                [
                    "upload-and-wait, all jobs done, s",
                    total,
                    "-",
                    f"{total / floor:.2f}x",
                    cpu,
                    f"{cpu / floor_cpu:.2f}x",
                ],
                ["one-batch embedding (floor), s", floor, "-", "1x", floor_cpu, "1x"],
            ],
        )
    )
    print(
        "per round (total s, floor s, server CPU s): "
        + ", ".join(
            f"({t:.2f}, {f:.2f}, {c:.2f})" for t, f, c in zip(totals, floors, cpus, strict=True)
        )
    )
    print(
        f"lone upload: p50 {statistics.median(ms):.0f} ms, p95 {percentile(ms, 95):.0f} ms "
        "(target <= 150 / 300 ms); upload-and-wait "
        f"{total / floor:.2f}x of one-batch embedding (target <= 2x)"
    )
