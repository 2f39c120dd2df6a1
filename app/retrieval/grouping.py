"""Search by document: the ranked chunks of one document collapse into its best-ranked chunk.

A document with many matching chunks (a long manual, a legal text cut into passages) would
otherwise take several of the top k places; grouped, it takes one, and its hit carries the
document's other ranked chunks, so a caller still sees how much of it matched and where.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, get_args

Grouping = Literal["chunk", "document"]
GROUPINGS: tuple[str, ...] = get_args(Grouping)

# When the candidates hold fewer than k documents and an arm was cut off at its limit, the arms
# run again with this many times the candidates, up to MAX_POOL_FACTOR times the configured
# numbers (480 chunks per arm by default): one long document cannot crowd the others out of
# the pool, and a query pays for the wider pool only when the first one lacked documents.
POOL_GROWTH = 4
MAX_POOL_FACTOR = 16


def group_by_document(
    ordered: Sequence[str], document_of: Callable[[str], str], k: int
) -> list[list[str]]:
    """The first k documents in rank order, each as its chunk ids best first; every ranked chunk
    of a listed document is kept, also those ranked below the k-th document's best chunk."""
    groups: dict[str, list[str]] = {}
    for chunk_id in ordered:
        document = document_of(chunk_id)
        if document in groups:
            groups[document].append(chunk_id)
        elif len(groups) < k:
            groups[document] = [chunk_id]
    return list(groups.values())
