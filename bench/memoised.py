"""Run a service process whose embedder remembers the passages it has embedded (bench only).

    python -m bench.memoised [MODULE [ARGS...]]     (MODULE defaults to app.serve)

Registers the embedding provider `use-memo`: the real `use` model, with a per-process memo from
passage text to its vector. Every vector is the one `use` computes; a passage seen before is
not computed again. `bench.many_tenants --memo` runs 1,000 tenants whose documents share most
of their passages, so the run measures what the service does around embedding (requests, jobs,
vector and keyword writes, memory, searches) in hours of machine time it has, and reports
embedding at the measured passages per second separately.

Never in the product: a memo shared across tenants would tell one tenant, by upload time,
which passages another tenant holds.
"""

from __future__ import annotations

import runpy
import sys
from threading import Lock

import numpy as np
import numpy.typing as npt

from app.providers.embeddings import EmbedderKey, extra_embedder, use_embedder
from app.providers.types import Embedder

PROVIDER = "use-memo"


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


def _build(key: EmbedderKey) -> Embedder:
    return MemoisedEmbedder(use_embedder(key.threads, key.batch_size, key.centre_questions))


def main() -> None:
    target = sys.argv[1] if len(sys.argv) > 1 else "app.serve"
    sys.argv = [target, *sys.argv[2:]]
    with extra_embedder(PROVIDER, _build):
        runpy.run_module(target, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
