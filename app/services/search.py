"""Retrieval-only search for a tenant, with the request limits applied."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.domain import RetrievalResult
from app.request_limits import RequestLimits
from app.retrieval.scope import EVERYTHING, SearchScope

if TYPE_CHECKING:
    from app.retrieval.grouping import Grouping
    from app.retrieval.hybrid import HybridRetriever


def search(
    retriever: HybridRetriever,
    limits: RequestLimits,
    *,
    tenant_id: str,
    query: str,
    k: int | None,
    group: Grouping = "chunk",
    scope: SearchScope = EVERYTHING,
) -> RetrievalResult:
    """Ranked chunks of the tenant for a query (or one per document) within `scope`, each with
    the evidence of every stage."""
    question = limits.question(query)
    return retriever.search(tenant_id, question, limits.k(k), group=group, scope=scope)
