"""The second dense arm in retrieval (RAG_SECOND_EMBEDDING): its ranking joins the first dense
arm's by RRF, and the fused list takes the dense arm's place in the hybrid fusion.

This is the combination measured in eval/two_dense_arms.py (USE and e5 fused first, then with
the keyword arm as the service fuses). The relevance gate keeps reading the first arm's best
similarity, the one its threshold is calibrated for. A scoped search searches this arm inside
the scope exactly as the first (exact among a small scope's chunks, the index's filter for a
large one). A tenant whose second collection is incomplete is ranked by the first arm alone
(`query_second` answers None).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from app.domain import Chunk
from app.retrieval.scope import DenseFilter
from app.timing import timed

if TYPE_CHECKING:
    from app.providers.types import Embedder


class SecondDenseReader(Protocol):
    """Nearest chunks by the second arm's vectors; `app.services.blocks.corpus.Corpus` provides
    it."""

    def second_ready(self, tenant_id: str) -> bool:
        """Whether the tenant's second-arm vectors cover every chunk."""
        ...

    def query_second(
        self,
        *,
        tenant_id: str,
        vector: Sequence[float],
        k: int,
        documents: Collection[str] | None = None,
        chunk_ids: Sequence[str] | None = None,
    ) -> list[tuple[Chunk, float]] | None:
        """The k nearest chunks, best first (None without the arm), only among these
        documents' chunks or exactly among these chunks when given; asked after
        `second_ready`, which it does not repeat."""
        ...


@dataclass(frozen=True)
class SecondDense:
    """The second arm as retrieval sees it: the embedder of questions and the reader."""

    embedder: Embedder
    reader: SecondDenseReader


def second_dense_hits(
    second: SecondDense, *, tenant_id: str, query: str, k: int, where: DenseFilter | None = None
) -> list[tuple[Chunk, float]] | None:
    """The tenant's k nearest chunks by the second arm, best first, inside a search scope the
    way the first arm searches it (`where`, from `ScopedReads.dense_filter`; None: the whole
    tenant), or None while its collection is incomplete; timed as `embed_query_second` and
    `dense_second`. The hybrid retriever fuses them into its dense list
    (`HybridRetriever._second_dense_arm`)."""
    inside = where or DenseFilter()
    return further_arm_hits(
        second.embedder,
        stage="second",
        query=query,
        ready=lambda: second.reader.second_ready(tenant_id),
        nearest=lambda vector: second.reader.query_second(
            tenant_id=tenant_id,
            vector=vector,
            k=k,
            documents=inside.documents,
            chunk_ids=inside.chunk_ids,
        ),
    )


def further_arm_hits(
    embedder: Embedder,
    *,
    stage: str,
    query: str,
    ready: Callable[[], bool],
    nearest: Callable[[Sequence[float]], list[tuple[Chunk, float]] | None],
) -> list[tuple[Chunk, float]] | None:
    """A dense arm beside the first (the second arm, the English arm): its `nearest` chunks to
    the question, or None while its collection is incomplete (`ready`, asked before the question
    is embedded by the arm's model). Timed as `dense_<stage>` and `embed_query_<stage>`."""
    with timed(f"dense_{stage}"):
        complete = ready()
    if not complete:
        return None
    with timed(f"embed_query_{stage}"):
        vector = embedder.embed_query(query)
    with timed(f"dense_{stage}"):
        return nearest(vector)
