"""Ingestion throughput: the whole pipeline (parse, chunk, embed, store) vs. the raw embedder.

Both run in one process on the same chunk texts, so the ratio shows what the pipeline adds on
top of embedding. Target: at most 25% overhead.

    python -m bench.ingest [--docs 40] [--provider use]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from app.config import load_settings
from app.ingestion import LoadLimits, chunk_pages, load
from app.providers.embeddings import build_embedder
from app.services.pipeline import PipelineConfig, index_file
from app.storage.chroma_store import build_vector_store
from bench.common import table

DATA = Path(
    os.environ.get("RAG_EVAL_DATA_DIR", Path(__file__).resolve().parents[2] / "shared/data")
)


def _write_documents(folder: Path, count: int) -> list[Path]:
    """Text files built from real XQuAD paragraphs (English and Arabic), ~10 paragraphs each."""
    paragraphs: list[str] = []
    for lang in ("en", "ar"):
        raw = json.loads((DATA / "xquad" / f"xquad.{lang}.json").read_text(encoding="utf-8"))
        paragraphs += [p["context"] for art in raw["data"] for p in art["paragraphs"]]
    paths = []
    for i in range(count):
        body = "\n\n".join(paragraphs[(i * 10 + j) % len(paragraphs)] for j in range(10))
        path = folder / f"doc{i:03d}.txt"
        path.write_text(body, encoding="utf-8")
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=40)
    parser.add_argument("--provider", default="use")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        settings = load_settings(
            _env_file=None, data_dir=root / "data", embedding_provider=args.provider
        )
        embedder = build_embedder(settings)
        embedder.embed_documents(["warm up"])
        store = build_vector_store(settings, embedder)
        paths = _write_documents(root, args.docs)
        limits = LoadLimits.from_settings(settings)
        config = PipelineConfig(
            settings.chunk_size,
            settings.chunk_overlap,
            limits,
            settings.parse_timeout_s,
            settings.embedding_batch_size,
        )

        texts: list[str] = []
        for path in paths:
            chunks = chunk_pages(
                load(path, limits),
                tenant_id="bench",
                document_id="d",
                source=path.name,
                chunk_size=settings.chunk_size,
                chunk_overlap=settings.chunk_overlap,
            )
            texts += [c.text for c in chunks]

        begin = time.perf_counter()
        for start in range(0, len(texts), settings.embedding_batch_size):
            embedder.embed_documents(texts[start : start + settings.embedding_batch_size])
        raw_s = time.perf_counter() - begin

        begin = time.perf_counter()
        indexed = 0
        for path in paths:
            result = index_file(
                path,
                tenant_id="bench",
                source=path.name,
                embedder=embedder,
                store=store,
                config=config,
            )
            indexed += result.chunks
        pipeline_s = time.perf_counter() - begin

    assert indexed == len(texts), (indexed, len(texts))
    overhead = pipeline_s / raw_s - 1.0
    print(f"embedder: {embedder.model_id}; {len(paths)} files, {len(texts)} chunks")
    print(
        table(
            ["workload", "seconds", "chunks/s", "vs raw embedder"],
            [
                ["raw embedder (embed_documents)", raw_s, len(texts) / raw_s, "1.00x"],
                [
                    "pipeline (parse+chunk+embed+store)",
                    pipeline_s,
                    len(texts) / pipeline_s,
                    f"{pipeline_s / raw_s:.2f}x",
                ],
            ],
        )
    )
    print(f"pipeline overhead: {overhead:+.1%} (target <= +25%)")


if __name__ == "__main__":
    main()
