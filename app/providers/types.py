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

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Embed several texts as questions at once (one request to a remote server); each gets
        the vector `embed_query` gives it."""
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
class FirstTokenMask:
    """Keeps a reply from opening in the wrong script: until the reply has produced its first
    letter, tokens holding a letter of `script` are masked, except the first token of `allow`
    (so an expected reply in that script, such as a refusal sentence, stays possible)."""

    script: Literal["latin"]
    allow: str = ""


@dataclass(frozen=True)
class Grounding:
    """The question and numbered passages (passage i has marker i + 1) a grounded prompt holds,
    for providers that answer without generating (`extractive`); `refusal_text` is their reply
    when no passage supports an answer. Generating providers read the messages instead."""

    question: str
    passages: tuple[str, ...]
    refusal_text: str


@dataclass(frozen=True)
class ChatRequest:
    """One chat call: the messages plus options. None means the provider's configured value
    (RAG_LLM_MAX_TOKENS; temperature 0). Options a provider cannot honour (the first-token mask
    and the probe on a chat server) are ignored: they steer, they never change the contract."""

    messages: tuple[ChatMessage, ...]
    max_tokens: int | None = None
    temperature: float | None = None
    stop: tuple[str, ...] = ()
    first_token_mask: FirstTokenMask | None = None
    # Report, on the first delta, the probability that the reply starts with this text's first
    # token instead of what it does start with (`LLMDelta.probe_probability`).
    probe: str | None = None
    grounding: Grounding | None = None
    # How many leading messages are the same for every request of this kind and hold no
    # tenant data (instructions, worked examples): a provider may evaluate them once and reuse
    # that state. Later messages are never reused from one request to the next.
    shared_prefix: int = 0


@dataclass(frozen=True)
class LLMDelta:
    """A piece of streamed reply text. On the first delta, where the provider knows them:
    `prompt_tokens`, and `probe_probability`, the model's probability of starting with the
    request's `probe` text instead (e.g. the refusal sentence: a confidence signal)."""

    text: str
    prompt_tokens: int | None = None
    probe_probability: float | None = None


@runtime_checkable
class LLM(Protocol):
    """Generates a chat reply, streamed as text deltas: `llm.stream(ChatRequest(messages))`."""

    @property
    def model_id(self) -> str:
        """Which provider and model answers."""
        ...

    def stream(self, request: ChatRequest) -> Iterator[LLMDelta]:
        """Stream the reply; raises ProviderUnavailable or GenerationTimeout on failure."""
        ...


@dataclass(frozen=True)
class ProviderOverrides:
    """Provider objects a process uses instead of those its settings name: the one seam through
    which tests hand in their fakes and a benchmark its wrapped model. A deployment selects
    providers by settings only; None keeps the configured one."""

    embedder: Embedder | None = None
    llm: LLM | None = None
