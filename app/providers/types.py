"""The small protocols every provider implements; factories build them from settings."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable


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


@dataclass(frozen=True)
class ChatMessage:
    """One turn of a chat prompt."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class LLMRequest:
    """One generation call: the chat messages, plus the question and numbered passages (passage
    i has marker i + 1) for providers that answer without generating, such as `extractive`."""

    messages: tuple[ChatMessage, ...]
    question: str
    passages: tuple[str, ...]
    refusal_text: str


@dataclass(frozen=True)
class LLMDelta:
    """A piece of streamed answer text. On the first delta, where the provider knows them:
    `prompt_tokens`, and `refusal_probability`, the model's probability of starting the exact
    refusal sentence instead of this answer (a confidence signal for abstaining)."""

    text: str
    prompt_tokens: int | None = None
    refusal_probability: float | None = None


@runtime_checkable
class LLM(Protocol):
    """Generates an answer to a request, streamed as text deltas (temperature 0)."""

    @property
    def model_id(self) -> str:
        """Which provider and model answers."""
        ...

    def stream(self, request: LLMRequest) -> Iterator[LLMDelta]:
        """Stream the answer; raises ProviderUnavailable or GenerationTimeout on failure."""
        ...
