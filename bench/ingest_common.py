"""What the ingestion benchmarks share: the paragraph files, the settings of a benchmark app,
the one-batch embedding they are measured against, and the rows of the upload tables."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from app.config import Settings, load_settings
from app.container import Container
from app.ingestion import LoadLimits, chunk_pages, load
from eval.datasets import data_dir

DATA = data_dir()


def write_documents(folder: Path, count: int, per_document: int) -> list[Path]:
    """Text files built from real XQuAD paragraphs (English and Arabic), `per_document` each."""
    paragraphs: list[str] = []
    for lang in ("en", "ar"):
        raw = json.loads((DATA / "xquad" / f"xquad.{lang}.json").read_text(encoding="utf-8"))
        paragraphs += [p["context"] for art in raw["data"] for p in art["paragraphs"]]
    paths = []
    for i in range(count):
        body = "\n\n".join(
            paragraphs[(i * per_document + j) % len(paragraphs)] for j in range(per_document)
        )
        path = folder / f"doc{i:03d}.txt"
        path.write_text(body, encoding="utf-8")
        paths.append(path)
    return paths


def paragraph_files(root: Path, count: int) -> list[Path]:
    """`count` files of one XQuAD paragraph each, in a new folder under `root`."""
    files = root / "files"
    files.mkdir()
    return write_documents(files, count, 1)


def chunk_texts(path: Path, settings: Settings, limits: LoadLimits) -> list[str]:
    """The texts of the chunks the pipeline would embed for this file."""
    chunks = chunk_pages(
        load(path, limits),
        tenant_id="bench",
        document_id="d",
        source=path.name,
        chunk_size=settings.chunk_size,
        chunk_overlap=settings.chunk_overlap,
    )
    return [chunk.text for chunk in chunks]


JWT_SECRET = "bench-only-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
POLL_S = 0.05  # how often a benchmark asks whether its jobs are done


def bench_settings(data_dir: Path, provider: str, **overrides: Any) -> Settings:
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


def embed_once(settings: Settings, paths: list[Path]) -> tuple[float, float, int]:
    """Wall and CPU seconds to embed the uploads' chunk texts in full batches in this process
    (no embedding child: its CPU time would not count here); how many chunks."""
    container = Container(settings.model_copy(update={"embedding_child_process": False}))
    embedder = container.embedder
    embedder.embed_documents(["warm up"])
    limits = LoadLimits.from_settings(settings)
    texts = [text for path in paths for text in chunk_texts(path, settings, limits)]
    size = settings.embedding_batch_size
    started, cpu_started = time.perf_counter(), time.process_time()
    for begin in range(0, len(texts), size):
        embedder.embed_documents(texts[begin : begin + size])
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return wall, cpu, len(texts)


UPLOAD_HEADERS = ["workload", "uploads posted s", "all jobs done s", "CPU s", "files/s"]
UPLOAD_HEADERS += ["vs embedding (wall)", "vs embedding (CPU)"]


def upload_row(
    name: str, results: list[dict[str, float]], uploads: int, floor: float, floor_cpu: float
) -> list[object]:
    """A row of the upload tables: medians of the rounds, and their ratios to the floor."""
    total = statistics.median(r["total"] for r in results)
    cpu = statistics.median(r["cpu"] for r in results)
    posted = statistics.median(r["uploads"] for r in results)
    ratios = [f"{total / floor:.2f}x", f"{cpu / floor_cpu:.2f}x"]
    return [name, posted, total, cpu, uploads / total, *ratios]
