"""Many small tenants through the public HTTP API of a live server.

Each tenant gets one user (added to the service database directly: bcrypt for hundreds of
logins would dominate the run), uploads one small text file with a code only it has, waits for
the job, and searches for that code; RSS of the server process is read along the way. Then every
tenant searches again in the same order (a cold search once the tenant was evicted) and once more
(warm). `tests/api/test_api_many_tenants_memory.py` runs the same code with a small bound.

    python -m bench.many_tenants TENANTS HOT [PARAGRAPHS] [--stack [--bounded-chroma]] [--memo]

With --stack the same run goes to the compose-like deployment (Chroma server, PostgreSQL, Redis,
one API process, one worker) and reports RSS per process and disk per tenant in each store;
--bounded-chroma also caps the Chroma server's HNSW cache at HOT collections. With --memo the
service processes run through bench.memoised: the real `use` embedder, but a passage every
tenant's document shares is computed once per process (1,000 tenants x 1k chunks is otherwise
~2 hours of embedding per setup); the run then reports the embedder's own passages per second,
measured here, for the embedding time it left out.

Prints RSS after every tenth of the tenants, MB per tenant for the second half, disk per
tenant, ingest time per upload, and cold / warm /search p50 / p95.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.common import median, percentile, process_rss_mb

PASSWORD = "many-tenants-password-1234"
FILLER = (
    "The maintenance crew inspects the relief valve, the pump seals and the pressure gauges "
    "every week, writes down what it finds, and replaces worn gaskets before they leak. "
)


def tenant_text(n: int, paragraphs: int) -> bytes:
    """A document only tenant n has: its code K{n}X in the first paragraph, then `paragraphs`
    numbered paragraphs (numbered, so that no two chunks of a long document are the same text
    and share one content-hashed chunk id; ~1.8 paragraphs per 1,000-character chunk)."""
    head = f"Tenant {n} keeps the spare impeller under code K{n}X in cabinet {n % 7}.\n\n"
    body = "\n\n".join(f"Entry {i}. " + FILLER * 3 for i in range(paragraphs))
    return (head + body).encode()


def add_tenants(data_dir: Path, env: dict[str, str], count: int) -> list[dict[str, str]]:
    """One user per tenant `t0`... in the server's database; returns their auth headers."""
    from app import security
    from app.config import load_settings
    from app.storage.db import open_database
    from app.storage.users import UserStore

    settings = load_settings(
        _env_file=None,
        data_dir=data_dir,
        env="production",
        jwt_secret=env["RAG_JWT_SECRET"],
        database_url=env.get("RAG_DATABASE_URL", ""),
    )
    database = open_database(settings.sqlalchemy_url)
    codec = security.build_token_codec(settings)
    password_hash = security.hash_password(PASSWORD, settings.bcrypt_rounds)
    users = UserStore(database)
    headers = []
    try:
        for n in range(count):
            record = users.add(f"t{n}", f"user-t{n}", password_hash)
            token = codec.issue(record.id, f"t{n}").access_token
            headers.append({"Authorization": f"Bearer {token}"})
    finally:
        database.dispose()
    return headers


@dataclass
class Run:
    """What one pass over the tenants measured."""

    rss_marks: list[tuple[int, float]] = field(default_factory=list)
    ingest_s: list[float] = field(default_factory=list)
    first_ms: list[float] = field(default_factory=list)
    cold_ms: list[float] = field(default_factory=list)
    warm_ms: list[float] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)

    def per_tenant_mb(self, start: int) -> float:
        """RSS growth per tenant from the mark at `start` tenants to the last mark."""
        begin = next(mb for n, mb in self.rss_marks if n >= start)
        first = next(n for n, _ in self.rss_marks if n >= start)
        end_n, end_mb = self.rss_marks[-1]
        return (end_mb - begin) / max(end_n - first, 1)


def _search(client: httpx.Client, headers: dict[str, str], n: int, run: Run) -> float:
    started = time.perf_counter()
    body = {"query": f"code K{n}X impeller", "k": 3}
    response = client.post("/search", json=body, headers=headers)
    elapsed = 1000 * (time.perf_counter() - started)
    response.raise_for_status()
    hits = response.json()["results"]
    if not hits or f"K{n}X" not in hits[0]["text"]:
        run.wrong.append(f"t{n}: {[h['text'][:40] for h in hits]}")
    return elapsed


def _ingest(client: httpx.Client, headers: dict[str, str], content: bytes) -> float:
    started = time.perf_counter()
    response = client.post("/documents", files={"file": ("note.txt", content)}, headers=headers)
    response.raise_for_status()
    job_id = response.json()["job_id"]
    while True:
        job = client.get(f"/jobs/{job_id}", headers=headers).json()
        if job["status"] == "done":
            return time.perf_counter() - started
        if job["status"] == "failed":
            raise RuntimeError(f"upload failed: {job}")
        time.sleep(0.05)


def exercise(
    base_url: str, pid: int, headers: list[dict[str, str]], paragraphs: int = 2, marks: int = 10
) -> Run:
    """Every tenant uploads and searches in turn, then all search again twice (see module doc)."""
    run = Run()
    count = len(headers)
    step = max(count // marks, 1)
    with httpx.Client(base_url=base_url, timeout=120) as client:
        for n, auth in enumerate(headers):
            run.ingest_s.append(_ingest(client, auth, tenant_text(n, paragraphs)))
            run.first_ms.append(_search(client, auth, n, run))
            if (n + 1) % step == 0 or n + 1 == count:
                run.rss_marks.append((n + 1, process_rss_mb(pid)))
        for n, auth in enumerate(headers):
            run.cold_ms.append(_search(client, auth, n, run))
            run.warm_ms.append(_search(client, auth, n, run))
        run.rss_marks.append((count, process_rss_mb(pid)))
    return run


def report(tenants: int, hot: int, paragraphs: int, started_mb: float, run: Run) -> None:
    """Print what one run measured (the lines main and the stack mode share)."""
    print(f"tenants={tenants} hot={hot} paragraphs={paragraphs}; RSS MB at start {started_mb:.0f}")
    print("RSS MB after N tenants: " + ", ".join(f"{n}: {mb:.0f}" for n, mb in run.rss_marks))
    print(
        f"second half {run.per_tenant_mb(tenants // 2):.3f} MB per tenant; ingest per upload p50 "
        f"{median(run.ingest_s):.2f} s p95 {percentile(run.ingest_s, 95):.2f} s; /search first "
        f"p50/p95 {median(run.first_ms):.0f}/{percentile(run.first_ms, 95):.0f} ms, cold "
        f"{median(run.cold_ms):.0f}/{percentile(run.cold_ms, 95):.0f} ms, warm "
        f"{median(run.warm_ms):.0f}/{percentile(run.warm_ms, 95):.0f} ms; "
        f"wrong results {len(run.wrong)}"
    )


def du_kb(path: Path) -> int:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def chunks_of_first_tenant(base_url: str, headers: dict[str, str]) -> int:
    return int(httpx.get(f"{base_url}/stats", headers=headers, timeout=30).json()["chunks"])


def service_settings(hot: int) -> dict[str, str]:
    """The RAG_ settings of the service processes (with --memo, bench.memoised wraps their
    `use` embedder)."""
    return {"RAG_HOT_TENANTS": str(hot)}


def embedding_rate(paragraphs: int) -> float:
    """Passages per second of the real `use` embedder on 1,000-character pieces of a tenant's
    document, in one batch (what --memo leaves out of the ingest times)."""
    from app.providers.embeddings import use_embedder

    text = tenant_text(0, paragraphs).decode()
    pieces = [text[i : i + 1000] for i in range(0, min(len(text), 256_000), 1000)]
    embedder = use_embedder(threads=0, batch_size=32)
    embedder.embed_documents(pieces[:8])
    started = time.perf_counter()
    embedder.embed_documents(pieces)
    return len(pieces) / (time.perf_counter() - started)


def run_on_stack(
    tenants: int, hot: int, paragraphs: int, bounded_server: bool, launcher: tuple[str, ...]
) -> None:
    """The same run on the compose-like deployment: Chroma server, PostgreSQL, Redis, one API
    process and one worker (testkit/local_stack.py starts them without Docker); with
    `bounded_server` the Chroma server's HNSW cache holds at most `hot` collections."""
    from sqlalchemy import create_engine

    from testkit.local_stack import LocalStack

    with tempfile.TemporaryDirectory() as root:
        stack = LocalStack(
            Path(root),
            settings=service_settings(hot),
            chroma_cache_collections=hot if bounded_server else 0,
            launcher=launcher,
        )
        try:
            stack.start_backends()
            headers = add_tenants(stack.data_dir, stack.env(), tenants)
            api = stack.start_api("api")
            worker = stack.start_worker("worker")
            stack.wait_ready(api)
            stack.wait_worker_ready(worker)
            chroma = next(p for p in stack.processes if p.name == "chroma")
            pids = {p.name: p.popen.pid for p in (api, worker, chroma)}
            started = {name: process_rss_mb(pid) for name, pid in pids.items()}
            run = exercise(api.url, pids["api"], headers, paragraphs)
            ended = {name: process_rss_mb(pid) for name, pid in pids.items()}
            chunks = chunks_of_first_tenant(api.url, headers[0])
            engine = create_engine(stack.database_url)
            with engine.connect() as connection:
                database_kb = (
                    connection.exec_driver_sql(
                        "SELECT pg_database_size(current_database())"
                    ).scalar_one()
                    / 1024
                )
            engine.dispose()
            chroma_kb = du_kb(Path(root) / "chroma")
            data_kb = du_kb(stack.data_dir)
        finally:
            leftovers = stack.close()
    report(tenants, hot, paragraphs, started["api"], run)
    print(
        f"chunks per tenant {chunks}; RSS MB per process start -> end: "
        + ", ".join(f"{name} {started[name]:.0f} -> {ended[name]:.0f}" for name in pids)
    )
    print(
        f"disk per tenant: Chroma server {chroma_kb / tenants:.0f} KB, PostgreSQL "
        f"{database_kb / tenants:.0f} KB (whole database), keyword indexes etc. "
        f"{data_kb / tenants:.0f} KB; Redis keys left {len(leftovers)}"
    )


def main() -> None:
    from testkit.live_server import LiveServer

    tenants, hot = int(sys.argv[1]), int(sys.argv[2])
    paragraphs = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3].isdigit() else 2
    print(f"load average before: {os.getloadavg()}", flush=True)
    memo = "--memo" in sys.argv
    if memo:
        print(f"use embedder alone: {embedding_rate(paragraphs):.0f} passages/s", flush=True)
    launcher: tuple[str, ...] = ("bench.memoised",) if memo else ()
    if "--stack" in sys.argv:
        run_on_stack(tenants, hot, paragraphs, "--bounded-chroma" in sys.argv, launcher)
        print(f"load average after: {os.getloadavg()}")
        return
    with tempfile.TemporaryDirectory() as root:
        server = LiveServer(
            Path(root) / "data",
            service_settings(hot),
            module=launcher[0] if launcher else "app.serve",
        )
        server.data_dir.mkdir(parents=True)
        headers = add_tenants(server.data_dir, server.env(), tenants)
        server.start(timeout_s=300)
        try:
            assert server.process is not None
            started_mb = process_rss_mb(server.process.pid)
            run = exercise(server.url, server.process.pid, headers, paragraphs)
            chunks = chunks_of_first_tenant(server.url, headers[0])
        finally:
            server.stop()
        disk_kb = du_kb(server.data_dir)
    report(tenants, hot, paragraphs, started_mb, run)
    print(f"chunks per tenant {chunks}; disk {disk_kb / tenants:.0f} KB per tenant")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
