"""The `extractive` provider: no language model, only the passages' own best sentences.

For a grounded request it returns the best supporting sentences of the top passages verbatim
(`app.text.sentences.best_sentences`), each followed by the marker of its passage, or the
refusal when nothing supports an answer. A plain chat (no grounding) gets its last user message
back: without a model there is nothing to rewrite or add. Deterministic and instant.
"""

from __future__ import annotations

from collections.abc import Iterator

from app.providers.types import ChatRequest, LLMDelta
from app.text.sentences import best_sentences


class ExtractiveLLM:
    """Answers with the passages' best supporting sentences, each with its marker."""

    def __init__(self, *, max_passages: int = 3, max_sentences: int = 2) -> None:
        self._max_passages = max_passages
        self._max_sentences = max_sentences

    @property
    def model_id(self) -> str:
        return "extractive"

    def stream(self, request: ChatRequest) -> Iterator[LLMDelta]:
        """One delta per chosen sentence, or the refusal when nothing supports an answer."""
        grounding = request.grounding
        if grounding is None:
            users = [m.content for m in request.messages if m.role == "user"]
            yield LLMDelta(users[-1] if users else "", 0)
            return
        chosen = best_sentences(
            grounding.question,
            grounding.passages,
            max_passages=self._max_passages,
            max_sentences=self._max_sentences,
        )
        if not chosen:
            yield LLMDelta(grounding.refusal_text, 0)
            return
        for index, (marker, sentence) in enumerate(chosen):
            separator = " " if index else ""
            yield LLMDelta(f"{separator}{sentence} [{marker}]", 0 if index == 0 else None)
