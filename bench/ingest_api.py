"""Many small uploads through the HTTP API until every job is done (`python -m bench.ingest --api`).

The app runs in this process on the real stack (TestClient, threads job backend, Chroma in a temp
directory, the configured embedder); files are posted one per request, as a client syncing a
folder would, then `/jobs/{id}` is polled until all are done. The same run is made with jobs run
one at a time (RAG_INGEST_BATCH_JOBS=1, the behaviour before batching) and batched (defaults),
next to the floor: embedding the same chunk texts in full batches in one go.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from app.config import Settings, load_settings
from app.ingestion import LoadLimits, chunk_pages, load
from app.main import create_app
from app.services.container import Container
from bench.common import table
from bench.ingest import _write_documents

JWT_SECRET = "bench-only-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
POLL_S = 0.05


def _settings(data_dir: Path, provider: str, **overrides: Any) -> Settings:
    return load_settings(
        _env_file=None,
        data_dir=data_dir,
        embedding_provider=provider,
        llm_provider="extractive",
        env="development",
        log_level="WARNING",  # a log line per request and job would be part of what is timed
        jwt_secret=JWT_SECRET,
        rate_limit_auth_per_minute=100_000,
        rate_limit_query_per_minute=100_000,
        **overrides,
    )


def _upload_all(settings: Settings, paths: list[Path]) -> dict[str, float]:
    """Upload every file through the API and wait for all jobs; phase timings in seconds."""
    app = create_app(settings)
    with TestClient(app) as client:
        container: Container = app.state.container
        record = container.users.create_user("bench", "bench-user", "a long bench password")
        token = container.token_codec.issue(record.id, "bench").access_token
        headers = {"Authorization": f"Bearer {token}"}
        started = time.perf_counter()
        job_ids = []
        for path in paths:
            response = client.post(
                "/documents", files={"file": (path.name, path.read_bytes())}, headers=headers
            )
            assert response.status_code == 202, response.text
            job_ids.append(response.json()["job_id"])
        uploaded = time.perf_counter()
        waiting = list(job_ids)
        while waiting:
            job = client.get(f"/jobs/{waiting[-1]}", headers=headers).json()
            if job["status"] == "failed":
                raise AssertionError(job)
            if job["status"] == "done":
                waiting.pop()
            else:
                time.sleep(POLL_S)
        finished = time.perf_counter()
        stats = client.get("/stats", headers=headers).json()
        assert stats["documents"] == len(paths), stats
    return {
        "uploads": uploaded - started,
        "total": finished - started,
        "chunks": float(stats["chunks"]),
    }


def _embed_once(settings: Settings, paths: list[Path]) -> tuple[float, int]:
    """Seconds to embed the uploads' chunk texts in full batches, and how many chunks."""
    container = Container(settings)
    embedder = container.embedder
    embedder.embed_documents(["warm up"])
    limits = LoadLimits.from_settings(settings)
    texts = [
        chunk.text
        for path in paths
        for chunk in chunk_pages(
            load(path, limits),
            tenant_id="bench",
            document_id="d",
            source=path.name,
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
        )
    ]
    size = settings.embedding_batch_size
    started = time.perf_counter()
    for begin in range(0, len(texts), size):
        embedder.embed_documents(texts[begin : begin + size])
    return time.perf_counter() - started, len(texts)


def run_api_workload(uploads: int, provider: str, rounds: int) -> None:
    """Print the table of the many-small-uploads workload (medians over `rounds`)."""
    runs: dict[str, list[dict[str, float]]] = {"one at a time": [], "batched": []}
    embed_runs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = root / "files"
        files.mkdir()
        paths = _write_documents(files, uploads, 1)
        for round_number in range(rounds):
            base = root / f"round{round_number}"
            seconds, chunks = _embed_once(_settings(base / "embed", provider), paths)
            embed_runs.append(seconds)
            one = _settings(base / "one", provider, ingest_batch_jobs=1)
            runs["one at a time"].append(_upload_all(one, paths))
            runs["batched"].append(_upload_all(_settings(base / "batched", provider), paths))
    floor = statistics.median(embed_runs)
    print(f"{uploads} uploads (one XQuAD paragraph each, {chunks} chunks); embedder {provider}; ")
    print(f"median of {rounds} round(s); one-batch embedding of the same texts: {floor:.2f} s")
    rows = []
    for name, results in runs.items():
        total = statistics.median(r["total"] for r in results)
        upload = statistics.median(r["uploads"] for r in results)
        rows.append([name, upload, total, uploads / total, f"{total / floor:.2f}x"])
    rows.append(["one-batch embedding (floor)", "-", floor, uploads / floor, "1.00x"])
    print(
        table(
            ["workload", "uploads posted s", "all jobs done s", "files/s", "vs embedding"],
            rows,
        )
    )
