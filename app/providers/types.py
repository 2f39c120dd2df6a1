"""The small protocols every provider implements; factories build them from settings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Embedder(Protocol):
    """Turns passages and queries into vectors (LangChain's `Embeddings` shape plus identity)."""

    @property
    def model_id(self) -> str:
        """Stable identity of the model; vectors of different ids never mix."""
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector this model returns."""
        ...

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages (with the model's passage prefix, if it has one)."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """Embed a question (with the model's query prefix, if it has one)."""
        ...


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, passage) pairs; higher is more relevant."""

    @property
    def model_id(self) -> str:
        """Stable identity of the reranking model."""
        ...

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One relevance score per passage, in input order."""
        ...
