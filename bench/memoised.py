"""Run a service process whose embedder remembers the passages it has embedded (bench only).

    python -m bench.memoised                         the API, as `python -m app.serve`
    python -m bench.memoised uvicorn ARGS...         the API, as `uvicorn ARGS` (app.main:app)
    python -m bench.memoised app.worker ARGS...      an ingestion worker, as `python -m app.worker`

The process runs with RAG_EMBEDDING_PROVIDER=use, and its container is handed the real `use`
model wrapped in a per-process memo from passage text to its vector (`ProviderOverrides`). Every
vector is the one `use` computes; a passage seen before is not computed again. `bench.many_tenants
--memo` runs 1,000 tenants whose documents share most of their passages, so the run measures
what the service does around embedding (requests, jobs, vector and keyword writes, memory,
searches) in hours of machine time it has, and reports embedding at the measured passages per
second separately.

Never in the product: a memo shared across tenants would tell one tenant, by upload time,
which passages another tenant holds.
"""

from __future__ import annotations

import sys
from threading import Lock

import numpy as np
import numpy.typing as npt
from fastapi import FastAPI

from app.config import get_settings
from app.main import create_app
from app.providers.embeddings import use_embedder
from app.providers.types import Embedder, ProviderOverrides

APP_FACTORY = "bench.memoised:memo_app"


class MemoisedEmbedder:
    """`inner` with a memo of passage vectors; questions are always embedded."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self._memo: dict[str, npt.NDArray[np.float32]] = {}
        self._lock = Lock()

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            missing = list(dict.fromkeys(text for text in texts if text not in self._memo))
        if missing:
            vectors = self._inner.embed_documents(missing)
            with self._lock:
                for text, vector in zip(missing, vectors, strict=True):
                    self._memo[text] = np.asarray(vector, dtype=np.float32)
        with self._lock:
            return [self._memo[text].tolist() for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._inner.embed_query(text)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return self._inner.embed_queries(texts)


def memo_providers() -> ProviderOverrides:
    """The configured `use` model, memoised, as this process's embedder."""
    settings = get_settings()
    if settings.embedding_provider != "use":
        sys.exit("error: bench.memoised wraps the `use` embedder; set RAG_EMBEDDING_PROVIDER=use")
    inner = use_embedder(
        settings.embedding_threads, settings.embedding_batch_size, settings.use_question_centring
    )
    return ProviderOverrides(embedder=MemoisedEmbedder(inner))


def memo_app() -> FastAPI:
    """The API with the memoised embedder (an app factory for uvicorn)."""
    return create_app(providers=memo_providers())


def main() -> None:
    target, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("app.serve", [])
    if target == "app.serve":
        from app import serve

        serve.main(APP_FACTORY, factory=True)
    elif target == "uvicorn":
        import uvicorn

        sys.argv = ["uvicorn", *(APP_FACTORY if a == "app.main:app" else a for a in args)]
        sys.argv.append("--factory")
        uvicorn.main()
    elif target == "app.worker":
        from app import worker

        sys.exit(worker.main(args, providers=memo_providers()))
    else:
        sys.exit(f"error: bench.memoised runs app.serve, uvicorn or app.worker, not {target!r}")


if __name__ == "__main__":
    main()
