"""The settings answering reads, as two frozen records built in one place.

`PassageLimits` says which passages the model reads and how much of each; `GenerationLimits`
adds the refusal sentence and the abstain threshold. The service, the evaluation and the
benchmarks answer through these, so they answer alike.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.domain import RetrievalResult, SearchHit
from app.generation.focus import FocusRule
from app.generation.grounded_answer import Answer, AnswerEvent, final_answer, shown_passages
from app.generation.grounded_answer import stream_answer as _stream_answer

if TYPE_CHECKING:
    from app.config import Settings
    from app.providers.types import LLM, Embedder


@dataclass(frozen=True)
class PassageLimits:
    """Which passages the model reads: the top `max_passages` within `max_passage_chars`, cut
    to the question's best sentences (`focus_chars` in all, shared out by `focus_rule`; 0 =
    whole passages), the best one
    last when `best_last`."""

    max_passages: int
    max_passage_chars: int
    focus_chars: int
    focus_rule: FocusRule = "ranked"
    best_last: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> PassageLimits:
        """RAG_LLM_MAX_PASSAGES, RAG_LLM_MAX_CONTEXT_CHARS, RAG_LLM_FOCUS_CHARS,
        RAG_LLM_FOCUS_RULE and RAG_LLM_PASSAGE_ORDER."""
        return cls(
            max_passages=settings.llm_max_passages,
            max_passage_chars=settings.llm_max_context_chars,
            focus_chars=settings.llm_focus_chars,
            focus_rule=settings.llm_focus_rule,
            best_last=settings.llm_passage_order == "best_last",
        )

    def shown(self, question: str, hits: Sequence[SearchHit]) -> list[SearchHit]:
        """The passages the model reads for this question."""
        return shown_passages(
            question,
            hits,
            max_passages=self.max_passages,
            max_passage_chars=self.max_passage_chars,
            focus_chars=self.focus_chars,
            focus_rule=self.focus_rule,
            best_last=self.best_last,
        )


@dataclass(frozen=True)
class GenerationLimits:
    """Everything from settings that `stream_answer` takes."""

    refusal_text: str
    passages: PassageLimits
    abstain_threshold: float

    @classmethod
    def from_settings(cls, settings: Settings) -> GenerationLimits:
        """RAG_REFUSAL_TEXT, the passage limits and RAG_LLM_ABSTAIN_THRESHOLD."""
        return cls(
            refusal_text=settings.refusal_text,
            passages=PassageLimits.from_settings(settings),
            abstain_threshold=settings.llm_abstain_threshold,
        )

    def stream(
        self,
        question: str,
        retrieval: RetrievalResult,
        llm: LLM,
        embedder: Embedder | None = None,
    ) -> Generator[AnswerEvent, None, None]:
        """`stream_answer` under these limits (`embedder`: the citation check's)."""
        return _stream_answer(
            question,
            retrieval,
            llm,
            refusal_text=self.refusal_text,
            max_passages=self.passages.max_passages,
            max_passage_chars=self.passages.max_passage_chars,
            focus_chars=self.passages.focus_chars,
            focus_rule=self.passages.focus_rule,
            best_last=self.passages.best_last,
            abstain_threshold=self.abstain_threshold,
            embedder=embedder,
        )

    def answer(
        self,
        question: str,
        retrieval: RetrievalResult,
        llm: LLM,
        embedder: Embedder | None = None,
    ) -> Answer:
        """The complete answer under these limits (the text `stream` streams)."""
        return final_answer(self.stream(question, retrieval, llm, embedder))
