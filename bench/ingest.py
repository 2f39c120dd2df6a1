"""Ingestion throughput: the whole pipeline (parse, chunk, embed, store, keyword index) vs. the
raw embedder.

All run in one process on the same chunk texts. The raw embedder runs twice: making exactly the
calls the pipeline makes (each upload is embedded on its own, in batches of
RAG_EMBEDDING_BATCH_SIZE), and, for reference, in full batches that cross document boundaries,
which no ingestion of separate uploads can do. Target: the pipeline adds at most 25% over
embedding the same documents.

`--api` runs the many-small-files workload instead: `--uploads` paragraph-sized files (one XQuAD
paragraph each), uploaded one per request through the HTTP API (TestClient, threads job backend,
real Chroma and embedder) and timed until every job is done, once with jobs run one at a time
(RAG_INGEST_BATCH_JOBS=1) and once batched (the default), next to embedding the same chunk texts
in full batches in one go. Target: batched uploads within 3x of that one-batch embedding.

`--one-file-per-request` is the folder-sync workload (a client mirroring a folder) on a live server:
`python -m app.serve` (uvicorn, one process, threads job backend, real Chroma and embedder) on
loopback, the `--uploads` files posted one per HTTP request by `--concurrency` (4) clients at once,
timed from the first upload until every job is done, next to embedding the same chunk texts in one
go (in this process, while no server runs). Target: within 2x of that one-batch embedding.

    python -m bench.ingest [--docs 40] [--paragraphs 10] [--provider use]
    python -m bench.ingest --api [--uploads 240]
    python -m bench.ingest --one-file-per-request [--uploads 240] [--concurrency 4] [--set RAG_X=v]
        [--files-per-request 10]     # the multi-file workload: several files in each request
    python -m bench.ingest --upload-and-wait [--uploads 240] [--concurrency 4] [--poll-ms 20]
        [--workers 1]                # on the scale-out stack, with this many worker processes

`--upload-and-wait`: each of `--concurrency` clients uploads one file, waits until its
job is done, then uploads the next, on a live server; and the latency of a lone 1 KB upload on
the idle server, median and p95 (bench/ingest_wait.py). A client waits with the long poll
`GET /jobs/{id}?wait=30`; `--poll-ms N` makes it poll every N ms instead. `--workers N` runs it
on the scale-out stack instead (one API process, N worker processes, a Chroma server, PostgreSQL
and Redis, as `testkit/local_stack.py` starts them).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from fastapi.testclient import TestClient

from app.config import Settings, load_settings
from app.container import Container
from app.ingestion import LoadLimits
from app.main import create_app
from app.providers.embeddings import build_embedder
from app.retrieval.keyword import KeywordIndex
from app.services.blocks.pipeline import PipelineConfig
from app.timing import StageTimer
from bench.common import (
    add_server_setting_option,
    process_cpu_s,
    server_settings_given,
    table,
)
from bench.ingest_common import (
    POLL_S,
    UPLOAD_HEADERS,
    bench_settings,
    chunk_texts,
    embed_once,
    paragraph_files,
    upload_row,
    write_documents,
)
from bench.ingest_http import run_http_workload
from bench.ingest_wait import run_wait_workload
from testkit.indexing import build_corpus, index_file

# Timed in this order in every round; the keys name them in the results.
WORKLOADS = {
    "per_document": "raw embedder, per document (the pipeline's calls)",
    "pooled": "raw embedder, batches across documents",
    "pipeline": "pipeline (parse+chunk+embed+store+keyword index)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=40)
    parser.add_argument("--provider", default="use")
    parser.add_argument(
        "--paragraphs",
        type=int,
        default=10,
        help="XQuAD paragraphs per document (~1.6 chunks each)",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved rounds; medians are reported"
    )
    parser.add_argument("--api", action="store_true", help="the many-small-uploads workload")
    parser.add_argument(
        "--one-file-per-request",
        action="store_true",
        help="many small files through a live HTTP server, several requests at once",
    )
    parser.add_argument(
        "--uploads", type=int, default=240, help="files uploaded (--api, --one-file-per-request)"
    )
    parser.add_argument("--concurrency", type=int, default=4, help="clients uploading at once")
    parser.add_argument(
        "--probe-search",
        action="store_true",
        help="--one-file-per-request: another tenant searches during the sync (its latency)",
    )
    parser.add_argument(
        "--files-per-request",
        type=int,
        default=1,
        help="--one-file-per-request: post this many files in each request instead (multi-file)",
    )
    parser.add_argument(
        "--upload-and-wait",
        action="store_true",
        help="clients that upload a file and wait for its job before the next; lone latency",
    )
    parser.add_argument(
        "--poll-ms",
        type=int,
        default=0,
        help="--upload-and-wait: poll each job every N ms instead of the long poll (0)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        help="--upload-and-wait: run on the scale-out stack (API process, this many worker "
        "processes, Chroma server, PostgreSQL, Redis) instead of one embedded process",
    )
    add_server_setting_option(parser, "RAG_INGEST_BATCH_JOBS=1")
    args = parser.parse_args()
    if args.upload_and_wait:
        run_wait_workload(
            args.uploads,
            args.provider,
            args.concurrency,
            args.rounds,
            server_settings_given(args.set),
            args.poll_ms,
            args.workers,
        )
        return
    if args.one_file_per_request:
        run_http_workload(
            args.uploads,
            args.provider,
            args.concurrency,
            args.rounds,
            server_settings_given(args.set),
            args.probe_search,
            args.files_per_request,
        )
        return
    if args.api:
        run_api_workload(args.uploads, args.provider, args.rounds)
        return

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        settings = load_settings(
            _env_file=None, data_dir=root / "data", embedding_provider=args.provider
        )
        embedder = build_embedder(settings)
        embedder.embed_documents(["warm up"])
        store = build_corpus(settings, embedder)
        keyword_index = KeywordIndex(store, root / "keyword")
        paths = write_documents(root, args.docs, args.paragraphs)
        limits = LoadLimits.from_settings(settings)
        config = PipelineConfig(
            settings.chunk_size,
            settings.chunk_overlap,
            limits,
            settings.parse_timeout_s,
            settings.embedding_batch_size,
        )

        documents = [chunk_texts(path, settings, limits) for path in paths]
        texts = [text for document in documents for text in document]
        batch = settings.embedding_batch_size

        def embed_per_document() -> None:  # the embedding calls the pipeline makes, only those
            for document in documents:
                for start in range(0, len(document), batch):
                    embedder.embed_documents(document[start : start + batch])

        def embed_pooled() -> None:  # full batches across documents
            for start in range(0, len(texts), batch):
                embedder.embed_documents(texts[start : start + batch])

        def run_pipeline(round_number: int) -> None:
            indexed = 0
            tenant = f"bench-{round_number}"  # a fresh tenant: every round adds
            for path in paths:
                result = index_file(
                    path,
                    tenant_id=tenant,
                    source=path.name,
                    embedder=embedder,
                    corpus=store,
                    config=config,
                )
                indexed += result.chunks
            # The worker brings the keyword index up to date after the last job of a burst
            # (bench.retrieval times one refresh per upload at 1k-100k chunks).
            with stages.stage("keyword index"):
                keyword_index.refresh(tenant)
            assert indexed == len(texts), (indexed, len(texts))
            assert len(keyword_index.snapshot(tenant).chunk_ids) == len(texts)

        stages = StageTimer()

        timings: dict[str, list[tuple[float, float]]] = {name: [] for name in WORKLOADS}
        keyword_rounds: list[float] = []
        for round_number in range(args.rounds):
            timings["per_document"].append(_timed(embed_per_document))
            timings["pooled"].append(_timed(embed_pooled))
            stages.stages.clear()
            timings["pipeline"].append(_timed(partial(run_pipeline, round_number)))
            keyword_rounds.append(stages.stages["keyword index"] / 1000)

    wall = {name: statistics.median(t[0] for t in runs) for name, runs in timings.items()}
    cpu = {name: statistics.median(t[1] for t in runs) for name, runs in timings.items()}
    print(
        f"embedder: {embedder.model_id}; {len(paths)} files, {len(texts)} chunks; "
        f"median of {args.rounds} interleaved rounds"
    )
    print(
        table(
            ["workload", "seconds", "CPU seconds", "chunks/s", "pipeline vs this"],
            [
                [
                    label,
                    wall[name],
                    cpu[name],
                    len(texts) / wall[name],
                    f"{wall['pipeline'] / wall[name]:.2f}x",
                ]
                for name, label in WORKLOADS.items()
            ],
        )
    )
    print(
        f"of the pipeline's time, the keyword index refresh after the last file: "
        f"{statistics.median(keyword_rounds):.3g} s (median per round)"
    )
    for measure, values in (("wall clock", wall), ("CPU time", cpu)):
        print(
            f"pipeline overhead ({measure}) over embedding the same documents: "
            f"{values['pipeline'] / values['per_document'] - 1:+.1%} (target <= +25%); "
            f"over cross-document batches: {values['pipeline'] / values['pooled'] - 1:+.1%}"
        )


def _timed(work: Callable[[], None]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and its children, the embedding child
    included) of one call. CPU time is what the work cost; unlike the wall clock it does not
    count time this shared VM gave to other tenants."""
    wall, cpu = time.perf_counter(), process_cpu_s(os.getpid())
    work()
    return time.perf_counter() - wall, process_cpu_s(os.getpid()) - cpu


# --- the many-small-uploads workload (--api) ---
#
# The app runs in this process on the real stack (TestClient, threads job backend, Chroma in a
# temp directory, the configured embedder); files are posted one per request, as a client syncing
# a folder would, then `/jobs/{id}` is polled until all are done.


def _upload_all(settings: Settings, paths: list[Path]) -> dict[str, float]:
    """Upload every file through the API and wait for all jobs; phase timings in seconds."""
    app = create_app(settings)
    with TestClient(app) as client:
        container: Container = app.state.container
        record = container.users.create_user(
            tenant_id="bench", username="bench-user", password="a long bench password"
        )
        token = container.token_codec.issue(record.id, "bench").access_token
        headers = {"Authorization": f"Bearer {token}"}
        started, cpu_started = time.perf_counter(), process_cpu_s(os.getpid())
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
        finished, cpu_finished = time.perf_counter(), process_cpu_s(os.getpid())
        stats = client.get("/stats", headers=headers).json()
        assert stats["documents"] == len(paths), stats
    return {
        "uploads": uploaded - started,
        "total": finished - started,
        # Every thread of this process: uploads, workers, polling (not other engineers' jobs).
        "cpu": cpu_finished - cpu_started,
        "chunks": float(stats["chunks"]),
    }


def run_api_workload(uploads: int, provider: str, rounds: int) -> None:
    """Print the table of the many-small-uploads workload (medians over `rounds`)."""
    runs: dict[str, list[dict[str, float]]] = {"one at a time": [], "batched": []}
    embed_wall: list[float] = []
    embed_cpu: list[float] = []
    chunks = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = paragraph_files(root, uploads)
        for round_number in range(rounds):  # interleaved, so load changes hit every workload
            base = root / f"round{round_number}"
            wall, cpu, chunks = embed_once(bench_settings(base / "embed", provider), paths)
            embed_wall.append(wall)
            embed_cpu.append(cpu)
            one = bench_settings(base / "one", provider, ingest_batch_jobs=1)
            runs["one at a time"].append(_upload_all(one, paths))
            runs["batched"].append(_upload_all(bench_settings(base / "batched", provider), paths))
    floor, floor_cpu = statistics.median(embed_wall), statistics.median(embed_cpu)
    print(
        f"{uploads} uploads (one XQuAD paragraph each, {chunks} chunks), one per request; "
        f"embedder {provider}; median of {rounds} interleaved round(s)"
    )
    rows = [upload_row(name, results, uploads, floor, floor_cpu) for name, results in runs.items()]
    rows.append(["one-batch embedding (floor)", "-", floor, floor_cpu, uploads / floor, "1x", "1x"])
    print(table(UPLOAD_HEADERS, rows))


if __name__ == "__main__":
    main()
