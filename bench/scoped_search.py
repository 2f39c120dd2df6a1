"""Search scoped to a small collection next to the same search over the whole tenant.

    python -m bench.scoped_search [--chunks 100000] [--share 0.01] [--queries 100]

One tenant of `chunks` chunks in real embedded Chroma, real SQLite rows and the real BM25 index,
in documents of 100 chunks; a scope holds `share` of the documents (a collection of 1%). Texts
are drawn from a 2,000-word vocabulary and embedded by the test suite's hashed bag-of-words
embedder (512 dimensions), so loading 100k chunks takes minutes, not hours of a real model. Each
query runs `HybridRetriever.search` (hybrid, k=10) unscoped and scoped, interleaved, and the
scoped dense arm both ways: the exact search among the scope's vectors (the default below
RAG_EXACT_SCOPE_CHUNKS) and Chroma's HNSW with a `where` filter on the document id, whose
recall@10 is measured against the exact top 10.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from app.config import load_settings
from app.domain import Chunk, chunk_id, document_id
from app.retrieval.hybrid import build_retriever
from app.retrieval.scope import SearchScope
from app.services.blocks.corpus import Corpus
from app.storage.chroma_index import ChromaVectorIndex, chroma_client
from app.storage.chunks import ChunkStore
from app.storage.db import open_database
from bench.common import median, percentile, table

TENANT = "bench-scope"
PER_DOCUMENT = 100


class HashedEmbedder:
    """Hashed bag of words, L2-normalised: shared words give near vectors (bench only)."""

    model_id = "bench:hashed-bow-512"
    dimension = 512

    def embed_query(self, text: str) -> list[float]:
        vector = np.zeros(self.dimension, dtype=np.float32)
        for word in text.split() or [""]:
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            vector[int.from_bytes(digest[:4], "little") % self.dimension] += (
                1.0 if digest[4] & 1 else -1.0
            )
        norm = float(np.linalg.norm(vector)) or 1.0
        unit: list[float] = (vector / norm).tolist()
        return unit

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(text) for text in texts]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)


def _load(corpus: Corpus, embedder: HashedEmbedder, chunks: int, rng: random.Random) -> list[str]:
    words = [f"w{i}" for i in range(2000)]
    documents = []
    for d in range(chunks // PER_DOCUMENT):
        doc = document_id(TENANT, f"doc{d:05d}.txt")
        texts = [" ".join(rng.choices(words, k=40)) + f" d{d}c{c}" for c in range(PER_DOCUMENT)]
        rows = [
            Chunk(
                chunk_id(TENANT, doc, c + 1, t),
                TENANT,
                doc,
                f"doc{d:05d}.txt",
                c + 1,
                str(c + 1),
                0,
                0,
                len(t),
                t,
            )
            for c, t in enumerate(texts)
        ]
        corpus.replace_documents(
            tenant_id=TENANT, documents=[(doc, rows, embedder.embed_documents(texts))]
        )
        documents.append(doc)
    return documents


def _ms(run: object) -> float:
    started = time.perf_counter()
    run()  # type: ignore[operator]
    return (time.perf_counter() - started) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--share", type=float, default=0.01)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as folder:
        settings = load_settings(_env_file=None, data_dir=Path(folder), embedding_provider="use")
        embedder = HashedEmbedder()
        index = ChromaVectorIndex(chroma_client(settings), embedder.model_id, embedder.dimension)
        rows = ChunkStore(open_database(f"sqlite:///{Path(folder) / 'rows.db'}"))
        corpus = Corpus(rows, index, embedder)
        started = time.perf_counter()
        documents = _load(corpus, embedder, args.chunks, rng)
        load_s = time.perf_counter() - started
        retriever = build_retriever(settings, embedder, corpus, reranker=None)
        scope = SearchScope(
            frozenset(rng.sample(documents, max(1, int(len(documents) * args.share)))), key="bench"
        )
        started = time.perf_counter()
        retriever.search(TENANT, "w1 w2", 10)  # the keyword index is built here, once
        retriever.search(TENANT, "w1 w2", 10, scope=scope)  # and the scope's owners
        warm_s = time.perf_counter() - started
        owners = retriever.scoped.owners(TENANT)
        inside = [owners.chunk_ids[i] for i in np.flatnonzero(owners.mask(scope)).tolist()]
        words = [f"w{i}" for i in range(2000)]
        unscoped, scoped, exact_dense, filtered_dense, recalls = [], [], [], [], []
        for _ in range(args.queries):
            question = " ".join(rng.choices(words, k=6))
            unscoped.append(_ms(lambda q=question: retriever.search(TENANT, q, 10)))
            scoped.append(_ms(lambda q=question: retriever.search(TENANT, q, 10, scope=scope)))
            vector = embedder.embed_query(question)
            exact: list[tuple[str, float]] = []
            hnsw: list[tuple[str, float]] = []
            exact_dense.append(
                _ms(
                    lambda v=vector, out=exact: out.extend(
                        index.nearest_among(TENANT, v, 10, inside)
                    )
                )
            )
            filtered_dense.append(
                _ms(
                    lambda v=vector, out=hnsw: out.extend(
                        index.query(TENANT, v, 10, scope.documents)
                    )
                )
            )
            truth = {cid for cid, _ in exact}
            recalls.append(len(truth & {cid for cid, _ in hnsw}) / max(1, len(truth)))

    rows_out = [
        [
            "/search hybrid, whole tenant",
            round(median(unscoped), 1),
            round(percentile(unscoped, 95), 1),
            1.0,
        ],
        [
            "/search hybrid, scoped",
            round(median(scoped), 1),
            round(percentile(scoped, 95), 1),
            round(percentile(scoped, 95) / percentile(unscoped, 95), 2),
        ],
        [
            "dense arm, exact among the scope",
            round(median(exact_dense), 1),
            round(percentile(exact_dense, 95), 1),
            "",
        ],
        [
            "dense arm, HNSW + where filter",
            round(median(filtered_dense), 1),
            round(percentile(filtered_dense, 95), 1),
            "",
        ],
    ]
    print(
        f"{args.chunks} chunks, scope {len(scope.documents or ())} documents = "
        f"{len(inside)} chunks; "
        f"load {load_s:.0f} s, first searches {warm_s:.1f} s; "
        f"HNSW+where recall@10 vs exact: mean {sum(recalls) / len(recalls):.3f}, "
        f"min {min(recalls):.2f}"
    )
    print(table(["search", "p50 ms", "p95 ms", "p95 / unscoped p95"], rows_out))


if __name__ == "__main__":
    main()
