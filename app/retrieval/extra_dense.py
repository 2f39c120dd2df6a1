"""The dense arms beside the first, as retrieval reads them: the second arm
(RAG_SECOND_EMBEDDING, e5) and the English arm (RAG_ENGLISH_EMBEDDING=minilm). Each is an
`ExtraDense`: its own embedder of questions and a reader of its own per-tenant collection. Both
search a scope exactly as the first arm (exact among a small scope's chunks, the index's filter
for a large one), and both stay out of retrieval while the tenant's collection is incomplete
(`ready` answers False) until `python -m app.cli reindex` fills it. The relevance gate keeps
reading the first arm's best similarity, the one its threshold is calibrated for. How each
arm's ranking joins the dense list is the hybrid retriever's (`app.retrieval.hybrid`):

- The second arm: its ranking joins the first dense arm's by RRF, and the fused list takes the
  dense arm's place in the hybrid fusion. This is the combination measured in
  eval/two_dense_arms.py (USE and e5 fused first, then with the keyword arm as the service
  fuses).
- The English arm ranks the chunks of English documents by an English model
  (all-MiniLM-L6-v2). Measured in eval/manuals_loo.py (docs/evaluation.md): on English manuals
  MiniLM is the better dense arm by far (mean MRR@10 0.517 -> 0.630), but it cannot embed
  Arabic. So the routing is by language on both sides (off by default: the hybrid falls under
  this arm on four manuals):
  - a question that is not English (`is_english_question`: Arabic, or Latin letters in another
    language) is ranked by the first embedder as without the option;
  - an English question is embedded by both: the first arm ranks every chunk as without the
    option, then the places it gave chunks of English documents go, in order, to the English
    arm's ranking of them; the chunks the English collection does not hold (an Arabic
    document, or one indexed before the option) keep their places, so an English question
    about an Arabic document finds it where it did. On a tenant of English documents only, the
    dense arm is the English arm's ranking alone. (Joining the two rankings by RRF instead put
    every other place in an Arabic chunk's hands: eval/mixed_languages.py, English questions
    about Arabic documents, dense nDCG@10 0.810 -> 0.684.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from app.domain import Chunk
from app.retrieval.corpus_reader import NearestReader
from app.retrieval.scope import DenseFilter
from app.timing import timed

if TYPE_CHECKING:
    from app.providers.types import Embedder


class ExtraDenseReader(NearestReader, Protocol):
    """One further arm's collection: `query` ranks by its vectors (as the first arm's, asked
    after `ready`, which it does not repeat); `app.services.blocks.corpus.ArmReads` provides
    it."""

    def ready(self, tenant_id: str) -> bool:
        """Whether the tenant's collection holds every chunk the arm should hold (every chunk;
        for the English arm, every chunk of the English documents)."""
        ...

    def held(self, *, tenant_id: str, chunk_ids: Sequence[str]) -> set[str]:
        """Which of these chunks the collection holds (for the English arm: the English ones)."""
        ...


@dataclass(frozen=True)
class ExtraDense:
    """A further dense arm as retrieval sees it: its stage name (`second`, `english`: the
    timers `embed_query_<stage>` and `dense_<stage>`), the embedder of questions and the
    reader."""

    stage: str
    embedder: Embedder
    reader: ExtraDenseReader


def extra_dense_hits(
    arm: ExtraDense, *, tenant_id: str, query: str, k: int, where: DenseFilter | None = None
) -> list[tuple[Chunk, float]] | None:
    """The tenant's k nearest chunks by the arm, best first, inside a search scope the way the
    first arm searches it (`where`, from `ScopedReads.dense_filter`; None: the whole tenant), or
    None while its collection is incomplete (`ready`, asked before the question is embedded by
    the arm's model). Timed as `dense_<stage>` and `embed_query_<stage>`."""
    with timed(f"dense_{arm.stage}"):
        complete = arm.reader.ready(tenant_id)
    if not complete:
        return None
    with timed(f"embed_query_{arm.stage}"):
        vector = arm.embedder.embed_query(query)
    with timed(f"dense_{arm.stage}"):
        return (where or DenseFilter()).nearest(arm.reader, tenant_id=tenant_id, vector=vector, k=k)
