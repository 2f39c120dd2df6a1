"""Ingestion throughput: the whole pipeline (parse, chunk, embed, store) vs. the raw embedder.

All run in one process on the same chunk texts. The raw embedder runs twice: making exactly the
calls the pipeline makes (each upload is embedded on its own, in batches of
RAG_EMBEDDING_BATCH_SIZE), and, for reference, in full batches that cross document boundaries,
which no ingestion of separate uploads can do. Target: the pipeline adds at most 25% over
embedding the same documents.

    python -m bench.ingest [--docs 40] [--paragraphs 10] [--provider use]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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


def _write_documents(folder: Path, count: int, per_document: int) -> list[Path]:
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
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        settings = load_settings(
            _env_file=None, data_dir=root / "data", embedding_provider=args.provider
        )
        embedder = build_embedder(settings)
        embedder.embed_documents(["warm up"])
        store = build_vector_store(settings, embedder)
        paths = _write_documents(root, args.docs, args.paragraphs)
        limits = LoadLimits.from_settings(settings)
        config = PipelineConfig(
            settings.chunk_size,
            settings.chunk_overlap,
            limits,
            settings.parse_timeout_s,
            settings.embedding_batch_size,
        )

        documents: list[list[str]] = []
        for path in paths:
            chunks = chunk_pages(
                load(path, limits),
                tenant_id="bench",
                document_id="d",
                source=path.name,
                chunk_size=settings.chunk_size,
                chunk_overlap=settings.chunk_overlap,
            )
            documents.append([c.text for c in chunks])
        texts = [text for document in documents for text in document]
        batch = settings.embedding_batch_size

        timings: dict[str, list[float]] = {"per_document": [], "pooled": [], "pipeline": []}
        for round_number in range(args.rounds):
            begin = time.perf_counter()
            for document in documents:  # the embedding calls the pipeline makes, and only those
                for start in range(0, len(document), batch):
                    embedder.embed_documents(document[start : start + batch])
            timings["per_document"].append(time.perf_counter() - begin)

            begin = time.perf_counter()
            for start in range(0, len(texts), batch):  # full batches across documents
                embedder.embed_documents(texts[start : start + batch])
            timings["pooled"].append(time.perf_counter() - begin)

            begin = time.perf_counter()
            indexed = 0
            for path in paths:
                result = index_file(
                    path,
                    tenant_id=f"bench-{round_number}",  # a fresh tenant: every round adds
                    source=path.name,
                    embedder=embedder,
                    store=store,
                    config=config,
                )
                indexed += result.chunks
            timings["pipeline"].append(time.perf_counter() - begin)
            assert indexed == len(texts), (indexed, len(texts))
        per_document_s, pooled_s, pipeline_s = (
            statistics.median(timings[name]) for name in ("per_document", "pooled", "pipeline")
        )

    print(
        f"embedder: {embedder.model_id}; {len(paths)} files, {len(texts)} chunks; "
        f"median of {args.rounds} interleaved rounds"
    )
    rows = [
        ["raw embedder, per document (the pipeline's calls)", per_document_s],
        ["raw embedder, batches across documents", pooled_s],
        ["pipeline (parse+chunk+embed+store)", pipeline_s],
    ]
    print(
        table(
            ["workload", "seconds", "chunks/s", "pipeline vs this"],
            [[name, sec, len(texts) / sec, f"{pipeline_s / sec:.2f}x"] for name, sec in rows],
        )
    )
    print(
        "pipeline overhead over embedding the same documents: "
        f"{pipeline_s / per_document_s - 1:+.1%} (target <= +25%); "
        f"over cross-document batches: {pipeline_s / pooled_s - 1:+.1%}"
    )


if __name__ == "__main__":
    main()
