"""Noisy neighbour: tenant B's /search and /health latency on a quiet server and while tenant A
bursts concurrent /query calls that need the real local LLM.

The server is `python -m app.serve` (uvicorn, one process) with the `llamacpp` provider, on a
temp data dir holding a small manual per tenant. Tenant A's users send `--burst` distinct
questions at once (cache misses); meanwhile one B client loops over /search and another over
/health, and B asks one question of its own shortly after the burst starts (the answer queue is
round robin between tenants, so B should wait behind at most one of A's answers). A's answers
beyond the answer bounds wait in the bounded queue or are refused with 429/503 at once.

    python -m bench.noisy_neighbour [--burst 12] [--a-users 3] [--max-tokens 32] [--set RAG_X=v]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from bench.common import (
    add_server_setting_option,
    median,
    percentile,
    quiet_vs_loaded_row,
    server_settings_given,
    table,
)
from testkit.live_server import REPO_ROOT, LiveServer

TENANT_A, TENANT_B = "noisy-a", "quiet-b"
PASSWORD = "noisy neighbour password"
CLIENT_TIMEOUT_S = 900.0  # far beyond any bound of the server: a timeout means it hung


@dataclass
class Outcome:
    """One /query: its HTTP status (None: transport error or timeout) and client latency."""

    status: int | None
    seconds: float
    queue_ms: float = 0.0
    retry_after: str | None = None


@dataclass
class Report:
    """Latencies (seconds) of B's probes, quiet and during A's burst, and A's outcomes."""

    quiet: dict[str, list[float]] = field(default_factory=dict)
    burst: dict[str, list[float]] = field(default_factory=dict)
    answers: list[Outcome] = field(default_factory=list)
    b_answer: Outcome | None = None
    burst_s: float = 0.0

    def refused(self) -> list[Outcome]:
        """A's answers refused with 429 or 503."""
        return [o for o in self.answers if o.status in (429, 503)]

    def answered(self) -> list[Outcome]:
        """A's answers that came back 200."""
        return [o for o in self.answers if o.status == 200]


def manual(label: str, paragraphs: int = 30) -> bytes:
    """A small maintenance manual: one line per valve (each tenant gets its own)."""
    return "\n\n".join(
        f"{label} valve V-{i:03d} sits on deck {i % 5} and is torqued to {20 + i} newton "
        f"metres; the {label} crew inspects it every {i % 7 + 1} weeks."
        for i in range(paragraphs)
    ).encode()


def server_settings(max_tokens: int) -> dict[str, str]:
    """Server settings: the real local LLM with short answers, generous abuse limits."""
    return {
        "RAG_LLM_PROVIDER": "llamacpp",
        "RAG_MODELS_DIR": str(REPO_ROOT / "models"),
        "RAG_LLM_MAX_TOKENS": str(max_tokens),
        "RAG_LLM_MAX_PASSAGES": "2",
        "RAG_LLM_MAX_CONTEXT_CHARS": "600",
        "RAG_RATE_LIMIT_QUERY_PER_MINUTE": "100000",
        "RAG_RATE_LIMIT_AUTH_PER_MINUTE": "1000",
        "RAG_LOG_LEVEL": "WARNING",
    }


@contextmanager
def noisy_server(
    data_dir: Path, a_users: int, max_tokens: int, extra: dict[str, str] | None = None
) -> Iterator[tuple[LiveServer, list[str], str]]:
    """A started server with A's users and B's user; yields it with their usernames."""
    server = LiveServer(data_dir, {**server_settings(max_tokens), **(extra or {})})
    a_names = [f"noisy{i}" for i in range(a_users)]
    for tenant, name in [*((TENANT_A, n) for n in a_names), (TENANT_B, "quiet0")]:
        server.cli(
            "create-user", "--tenant", tenant, "--username", name, "--password-stdin",
            stdin=PASSWORD + "\n",
        )  # fmt: skip
    server.start(timeout_s=300)
    try:
        yield server, a_names, "quiet0"
    finally:
        server.stop()


async def _login(client: httpx.AsyncClient, username: str) -> dict[str, str]:
    form = {"username": username, "password": PASSWORD}
    response = await client.post("/auth/token", data=form)
    response.raise_for_status()
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


async def _upload(client: httpx.AsyncClient, headers: dict[str, str], content: bytes) -> None:
    response = await client.post(
        "/documents", files={"file": ("manual.txt", content)}, headers=headers
    )
    response.raise_for_status()
    job_id = response.json()["job_id"]
    while True:
        job = (await client.get(f"/jobs/{job_id}", headers=headers)).json()
        if job["status"] == "done":
            return
        if job["status"] == "failed":
            raise RuntimeError(f"upload failed: {job}")
        await asyncio.sleep(0.2)


async def _probe(client: httpx.AsyncClient, route: str, headers: dict[str, str]) -> float:
    started = time.perf_counter()
    if route == "/health":
        response = await client.get("/health")
    else:
        response = await client.post(
            "/search", json={"query": "torque of valve V-012 on deck 2"}, headers=headers
        )
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed


async def _probe_loop(
    client: httpx.AsyncClient,
    route: str,
    headers: dict[str, str],
    *,
    count: int | None = None,
    until: asyncio.Event | None = None,
) -> list[float]:
    """Sequential probes of one route: `count` of them, or until the event is set."""
    latencies: list[float] = []
    while (count is not None and len(latencies) < count) or (until and not until.is_set()):
        latencies.append(await _probe(client, route, headers))
        await asyncio.sleep(0.05)  # a client that polls, not a flood
    return latencies


async def _ask(client: httpx.AsyncClient, headers: dict[str, str], question: str) -> Outcome:
    started = time.perf_counter()
    try:
        response = await client.post("/query", json={"question": question}, headers=headers)
    except httpx.TransportError:
        return Outcome(None, time.perf_counter() - started)
    elapsed = time.perf_counter() - started
    queue_ms = 0.0
    if response.status_code == 200:
        queue_ms = response.json()["timings"].get("queue", 0.0)
    return Outcome(response.status_code, elapsed, queue_ms, response.headers.get("Retry-After"))


async def measure(
    url: str, a_names: list[str], b_name: str, *, burst: int, quiet_probes: int, b_asks: bool
) -> Report:
    """Quiet probes, then the burst with probes running alongside; returns every latency."""
    report = Report()
    limits = httpx.Limits(max_connections=burst + 8)
    async with httpx.AsyncClient(base_url=url, timeout=CLIENT_TIMEOUT_S, limits=limits) as client:
        a_headers = [await _login(client, name) for name in a_names]
        b_headers = await _login(client, b_name)
        await _upload(client, a_headers[0], manual("Aft"))
        await _upload(client, b_headers, manual("Bow"))
        await _probe(client, "/search", b_headers)  # builds B's keyword index
        for route in ("/search", "/health"):
            report.quiet[route] = await _probe_loop(client, route, b_headers, count=quiet_probes)

        done = asyncio.Event()
        probes = [
            asyncio.create_task(_probe_loop(client, route, b_headers, until=done))
            for route in ("/search", "/health")
        ]
        started = time.perf_counter()
        asks = [
            asyncio.create_task(
                _ask(
                    client,
                    a_headers[i % len(a_headers)],
                    f"How many newton metres is Aft valve V-{i:03d} torqued to?",
                )
            )
            for i in range(burst)
        ]
        if b_asks:
            await asyncio.sleep(1.0)  # A's burst is queued by now
            report.b_answer = await _ask(client, b_headers, "Which deck is Bow valve V-007 on?")
        report.answers = list(await asyncio.gather(*asks))
        report.burst_s = time.perf_counter() - started
        done.set()
        for route, task in zip(("/search", "/health"), probes, strict=True):
            report.burst[route] = await task
    return report


def print_report(report: Report) -> None:
    """B's latency table (quiet vs burst), then what A's burst got."""
    rows = []
    for route in ("/search", "/health"):
        quiet, burst = report.quiet[route], report.burst[route]
        ratio = round(percentile(burst, 95) / percentile(quiet, 95), 2)
        rows.append([*quiet_vs_loaded_row(f"B {route}", quiet, burst), ratio])
    print(
        table(
            [
                "workload",
                "quiet n",
                "quiet p50 ms",
                "quiet p95 ms",
                "burst n",
                "burst p50 ms",
                "burst p95 ms",
                "burst max ms",
                "p95 burst/quiet",
            ],
            rows,
        )
    )
    statuses: dict[str, int] = {}
    for outcome in report.answers:
        key = str(outcome.status) if outcome.status is not None else "timeout/transport"
        statuses[key] = statuses.get(key, 0) + 1
    refused = [o.seconds * 1000 for o in report.refused()]
    answered = report.answered()
    print(f"\nA's burst: {len(report.answers)} /query in {report.burst_s:.1f} s -> {statuses}")
    at_once = [ms for ms in refused if ms < 1000]
    if at_once:
        print(
            f"  refused at once: {len(at_once)}, "
            f"p50 {median(at_once):.0f} ms, max {max(at_once):.0f} ms"
        )
    waited = [ms / 1000 for ms in refused if ms >= 1000]
    if waited:
        print(f"  refused after waiting in the queue: {len(waited)}, max {max(waited):.1f} s")
    if answered:
        print(
            f"  answered: p50 {median([o.seconds for o in answered]):.1f} s, "
            f"max {max(o.seconds for o in answered):.1f} s, "
            f"queued p50 {median([o.queue_ms for o in answered]) / 1000:.1f} s"
        )
    if report.b_answer is not None:
        b = report.b_answer
        print(
            f"B's own /query during the burst: status {b.status}, {b.seconds:.1f} s "
            f"({b.queue_ms / 1000:.1f} s of it queued)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--burst", type=int, default=12, help="A's concurrent /query calls")
    parser.add_argument("--a-users", type=int, default=3, help="users of tenant A sharing them")
    parser.add_argument("--max-tokens", type=int, default=32, help="RAG_LLM_MAX_TOKENS")
    parser.add_argument("--quiet-probes", type=int, default=40)
    parser.add_argument("--no-b-query", action="store_true", help="B does not ask during it")
    add_server_setting_option(parser, "RAG_LLM_THREADS=1")
    args = parser.parse_args()
    extra = server_settings_given(args.set)
    with (
        tempfile.TemporaryDirectory() as tmp,
        noisy_server(Path(tmp) / "data", args.a_users, args.max_tokens, extra) as (
            server,
            a_names,
            b_name,
        ),
    ):
        report = asyncio.run(
            measure(
                server.url,
                a_names,
                b_name,
                burst=args.burst,
                quiet_probes=args.quiet_probes,
                b_asks=not args.no_b_query,
            )
        )
    print(f"\nsettings: {server_settings(args.max_tokens) | extra}")
    print_report(report)


if __name__ == "__main__":
    main()
