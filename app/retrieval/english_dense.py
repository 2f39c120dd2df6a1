"""The English arm in retrieval (RAG_ENGLISH_EMBEDDING): an English question's dense arm ranks
the chunks of English documents by an English model (all-MiniLM-L6-v2) instead of the first
embedder.

Measured in eval/manuals_loo.py (docs/evaluation.md): on English manuals MiniLM is the better
dense arm by far (mean MRR@10 0.517 -> 0.630), but it cannot embed Arabic. So the routing is by
language on both sides (off by default: the hybrid falls under this arm on four manuals):

- a question that is not English (`is_english_question`: Arabic, or Latin letters in another
  language) is ranked by the first embedder as without the option;
- an English question is embedded by both: the first arm ranks every chunk as without the
  option, then the places it gave chunks of English documents go, in order, to the English arm's
  ranking of them; the chunks the English collection does not hold (an Arabic document, or one
  indexed before the option) keep their places, so an English question about an Arabic document
  finds it where it did. On a tenant of English documents only, the dense arm is the English
  arm's ranking alone. (Joining the two rankings by RRF instead put every other place in an
  Arabic chunk's hands: eval/mixed_languages.py, English questions about Arabic documents, dense
  nDCG@10 0.810 -> 0.684.)

The relevance gate keeps reading the first arm's best similarity over every chunk, the one its
threshold is calibrated for. A scoped search searches the English arm inside the scope as the
first. A tenant whose English collection is incomplete is ranked as without the option
(`english_ready` answers False) until `python -m app.cli reindex` fills it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from app.domain import Chunk
from app.retrieval.scope import DenseFilter
from app.retrieval.second_dense import further_arm_hits
from app.text.language import is_english_question

if TYPE_CHECKING:
    from app.providers.types import Embedder


class EnglishDenseReader(Protocol):
    """Nearest chunks by the English arm's vectors; `app.services.blocks.corpus.Corpus`
    provides it."""

    def english_ready(self, tenant_id: str) -> bool:
        """Whether the tenant's English collection holds every chunk of its English
        documents."""
        ...

    def query_english(
        self,
        *,
        tenant_id: str,
        vector: Sequence[float],
        k: int,
        documents: Collection[str] | None = None,
        chunk_ids: Sequence[str] | None = None,
    ) -> list[tuple[Chunk, float]] | None:
        """The k nearest chunks of English documents, best first (None without the arm)."""
        ...

    def english_held(self, *, tenant_id: str, chunk_ids: Sequence[str]) -> set[str]:
        """Which of these chunks the English collection holds."""
        ...


@dataclass(frozen=True)
class EnglishDense:
    """The English arm as retrieval sees it: the embedder of questions and the reader."""

    embedder: Embedder
    reader: EnglishDenseReader


def english_dense_hits(
    english: EnglishDense,
    *,
    tenant_id: str,
    query: str,
    k: int,
    where: DenseFilter | None = None,
) -> list[tuple[Chunk, float]] | None:
    """The tenant's k nearest chunks of English documents by the English arm, best first,
    inside a search scope (`where`; None: the whole tenant); None when the question is not
    English or the tenant's English collection is incomplete. Timed as `embed_query_english`
    and `dense_english`."""
    if not is_english_question(query):
        return None
    inside = where or DenseFilter()
    return further_arm_hits(
        english.embedder,
        stage="english",
        query=query,
        ready=lambda: english.reader.english_ready(tenant_id),
        nearest=lambda vector: english.reader.query_english(
            tenant_id=tenant_id,
            vector=vector,
            k=k,
            documents=inside.documents,
            chunk_ids=inside.chunk_ids,
        ),
    )
