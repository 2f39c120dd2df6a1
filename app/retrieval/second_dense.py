"""The second dense arm in retrieval (RAG_SECOND_EMBEDDING): its ranking joins the first dense
arm's by RRF, and the fused list takes the dense arm's place in the hybrid fusion.

This is the combination measured in eval/two_dense_arms.py (USE and e5 fused first, then with
the keyword arm as the service fuses). The relevance gate keeps reading the first arm's best
similarity, the one its threshold is calibrated for. A tenant whose second collection is
incomplete is ranked by the first arm alone (`query_second` answers None).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from app.domain import Chunk
from app.retrieval.fusion import reciprocal_rank_fusion
from app.timing import timed

if TYPE_CHECKING:
    from app.providers.types import Embedder
    from app.retrieval.hybrid import Recall


class SecondDenseReader(Protocol):
    """Nearest chunks by the second arm's vectors; `app.services.corpus.Corpus` provides it."""

    def second_ready(self, tenant_id: str) -> bool:
        """Whether the tenant's second-arm vectors cover every chunk."""
        ...

    def query_second(
        self, tenant_id: str, vector: Sequence[float], k: int
    ) -> list[tuple[Chunk, float]] | None:
        """The k nearest chunks, best first; None while the arm cannot be searched."""
        ...


@dataclass(frozen=True)
class SecondDense:
    """The second arm as retrieval sees it: the embedder of questions and the reader."""

    embedder: Embedder
    reader: SecondDenseReader


def second_dense_arm(
    second: SecondDense, tenant_id: str, query: str, recall: Recall, k: int
) -> None:
    """Rank the tenant's chunks by the second arm and fuse that list into `recall.dense_ids`
    (the first `k` of the RRF of both arms); timed as `embed_query_second` and `dense_second`.
    Called right after the first dense arm, before the keyword arm."""
    with timed("dense_second"):
        ready = second.reader.second_ready(tenant_id)
    if not ready:
        return
    with timed("embed_query_second"):
        vector = second.embedder.embed_query(query)
    with timed("dense_second"):
        hits = second.reader.query_second(tenant_id, vector, k)
        if hits is None:  # filled or emptied since the check: rank by the first arm
            return
        for rank, (chunk, similarity) in enumerate(hits, start=1):
            candidate = recall.candidate(chunk.id)
            candidate.chunk = chunk
            candidate.second_dense_rank = rank
            candidate.second_dense_score = similarity
        second_ids = [chunk.id for chunk, _ in hits]
        fused = reciprocal_rank_fusion([recall.dense_ids, second_ids], [1.0, 1.0])
        recall.dense_ids = [chunk_id for chunk_id, _ in fused[:k]]
        # Runs before the keyword arm: every candidate so far is a dense one, and those the
        # fused list left out must not reach the fusion's tail as if they were exact matches.
        kept = set(recall.dense_ids)
        for chunk_id in [c for c in recall.candidates if c not in kept]:
            del recall.candidates[chunk_id]
