"""Fast stand-ins for the LLM and the embedder, for unit tests only.

They are not production providers, and no setting names them: a test hands them to the
container (`Container(settings, fake_providers())`, `create_app(settings, providers=...)`), the
one seam through which a process gets providers its settings do not name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from app.providers.embeddings import l2_normalise
from app.providers.types import LLM, ChatRequest, LLMDelta, ProviderOverrides

FAKE_DIMENSION = 512
_WORD = re.compile(r"\w+", re.UNICODE)

Reply = str | Sequence[str] | Callable[[ChatRequest], str]


class FakeLLM:
    """Scripted replies, streamed in small pieces so marker handling is exercised.

    `replies` is one fixed text, a list consumed one per call, or a function of the request; by
    default a grounded request gets an answer citing passage 1 (or the refusal when there are no
    passages) and a plain chat gets "Fake reply.".
    """

    def __init__(
        self,
        replies: Reply | None = None,
        *,
        piece_chars: int = 3,
        prompt_tokens: int = 42,
        probe_probability: float | None = None,
    ) -> None:
        self._replies = replies
        self._piece_chars = piece_chars
        self._prompt_tokens = prompt_tokens
        self._probe_probability = probe_probability
        self.requests: list[ChatRequest] = []
        self.pieces_streamed = 0

    @property
    def model_id(self) -> str:
        return "fake"

    def _reply(self, request: ChatRequest) -> str:
        replies = self._replies
        if replies is None:
            grounding = request.grounding
            if grounding is None:
                return "Fake reply."
            return "Fake answer [1]." if grounding.passages else grounding.refusal_text
        if isinstance(replies, str):
            return replies
        if callable(replies):
            return replies(request)
        return replies[len(self.requests) - 1]

    def stream(self, request: ChatRequest) -> Iterator[LLMDelta]:
        """Record the request and stream the scripted reply."""
        self.requests.append(request)
        text = self._reply(request)
        for start in range(0, len(text), self._piece_chars):
            piece = text[start : start + self._piece_chars]
            self.pieces_streamed += 1
            if start == 0:
                yield LLMDelta(piece, self._prompt_tokens, self._probe_probability)
            else:
                yield LLMDelta(piece)


class FakeEmbedder:
    """Deterministic hashed bag-of-words: shared words give similar vectors (real lexical signal).

    Each lower-cased word token is hashed to a signed bucket; the counts are L2-normalised.
    """

    def __init__(self, dimension: int = FAKE_DIMENSION) -> None:
        self._dimension = dimension

    @property
    def model_id(self) -> str:
        return f"fake:hashed-bow-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages."""
        return [self.embed_query(text) for text in texts]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Embed questions."""
        return [self.embed_query(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """Embed a question (the fake model has no query prefix)."""
        vector = np.zeros(self._dimension, dtype=np.float32)
        # An empty text still needs a unit vector: cosine with a zero vector is undefined.
        for token in _WORD.findall(text.lower()) or [""]:
            digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self._dimension
            vector[bucket] += 1.0 if digest[4] & 1 else -1.0
        if not vector.any():  # colliding tokens of opposite sign cancelled out
            vector[0] = 1.0
        row: list[float] = l2_normalise(vector)[0].tolist()
        return row


def fake_providers(llm: LLM | None = None) -> ProviderOverrides:
    """The fake embedder, and `llm` when given, in place of the ones the settings name."""
    return ProviderOverrides(embedder=FakeEmbedder(), llm=llm)
