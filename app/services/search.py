"""Retrieval-only search for a tenant, with the request limits applied."""

from __future__ import annotations

from app.domain import RetrievalResult
from app.errors import InvalidInput
from app.services.container import Container


def resolve_k(container: Container, k: int | None) -> int:
    """The requested k, or the default; InvalidInput above the configured cap."""
    settings = container.settings
    if k is None:
        return settings.top_k
    if not 1 <= k <= settings.max_k:
        raise InvalidInput(f"k must be between 1 and {settings.max_k}")
    return k


def check_question(container: Container, text: str) -> str:
    """The question stripped; InvalidInput when blank or over the length cap.

    The cap applies to the text as sent (as /openapi.json documents it), whitespace included.
    """
    limit = container.settings.max_question_chars
    if len(text) > limit:
        raise InvalidInput(f"the question is longer than {limit} characters")
    stripped = text.strip()
    if not stripped:
        raise InvalidInput("the question is empty")
    return stripped


def search(container: Container, tenant_id: str, query: str, k: int | None) -> RetrievalResult:
    """Ranked chunks of the tenant for a query, each with the evidence of every stage."""
    question = check_question(container, query)
    return container.retriever.search(tenant_id, question, resolve_k(container, k))
