"""Grounded answers: retrieved passages in, a cited answer or the exact refusal out.

`stream_answer` is the one implementation; `answer_question` collects it, so streamed and
non-streamed answers are the same text by construction. Only the time spent inside the model is
recorded as the `generate` stage (a paused client does not count), and when retrieval found
nothing relevant the model is not called at all.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field

from app.domain import RetrievalResult, SearchHit
from app.generation.citations import Citation, MarkerFilter, citations_for, is_refusal
from app.generation.grounding import CitationChecker
from app.generation.prompt import build_request
from app.providers.types import LLM, LLMDelta
from app.timing import timed


@dataclass(frozen=True)
class Answer:
    """A short answer with its citations, or the refusal sentence with none."""

    text: str
    citations: list[Citation] = field(default_factory=list)
    refused: bool = False
    prompt_tokens: int | None = None
    model_id: str = ""
    dropped_markers: int = 0  # invented markers removed from the text
    refusal_probability: float | None = None  # the model's, at its first token, when known


@dataclass(frozen=True)
class AnswerDelta:
    """A piece of the answer text as it is generated (already cleaned of invalid markers)."""

    text: str


@dataclass(frozen=True)
class AnswerDone:
    """The last event of a stream: the complete answer with its citations."""

    answer: Answer


AnswerEvent = AnswerDelta | AnswerDone


def fit_passages(hits: Sequence[SearchHit], max_chars: int | None) -> list[SearchHit]:
    """The best-ranked hits whose texts fit `max_chars` together (always at least one)."""
    kept: list[SearchHit] = []
    used = 0
    for hit in hits:
        used += len(hit.chunk.text)
        if kept and max_chars is not None and used > max_chars:
            break
        kept.append(hit)
    return kept


def _next_delta(deltas: Iterator[LLMDelta]) -> LLMDelta | None:
    with timed("generate"):
        return next(deltas, None)


def stream_answer(
    question: str,
    retrieval: RetrievalResult,
    llm: LLM,
    *,
    refusal_text: str,
    max_passages: int | None = None,
    max_passage_chars: int | None = None,
    abstain_threshold: float = 1.0,
) -> Generator[AnswerEvent, None, None]:
    """Yield cleaned text deltas, then one AnswerDone with citations and the refusal flag.

    When the model's first delta says it was at least `abstain_threshold` likely to start the
    refusal sentence, the generation is stopped before any text is shown and the answer is the
    refusal: a small model that hesitates between answering and refusing is usually guessing.
    """
    hits = fit_passages(retrieval.hits[:max_passages], max_passage_chars)
    if not retrieval.relevant or not hits:
        yield AnswerDelta(refusal_text)
        yield AnswerDone(Answer(refusal_text, refused=True, model_id=llm.model_id))
        return

    with timed("generate"):  # preparing the prompt and the marker checks is part of it
        request = build_request(question, hits, refusal_text)
        checker = CitationChecker(question, request.passages)
        marker_filter = MarkerFilter(len(hits), checker.repoint)
    shown: list[str] = []
    prompt_tokens: int | None = None
    refusal_probability: float | None = None
    abstained = False
    deltas = iter(llm.stream(request))
    try:
        while (delta := _next_delta(deltas)) is not None:
            if delta.prompt_tokens is not None:
                prompt_tokens = delta.prompt_tokens
            if delta.refusal_probability is not None:
                refusal_probability = delta.refusal_probability
                if not shown and refusal_probability >= abstain_threshold:
                    abstained = True
                    break
            with timed("generate"):
                text = marker_filter.feed(delta.text)
            if text:
                shown.append(text)
                yield AnswerDelta(text)
    finally:
        close = getattr(deltas, "close", None)
        if close is not None:
            close()  # a client that hangs up frees the model lock now
    if abstained:
        yield AnswerDelta(refusal_text)
        shown = [refusal_text]
    else:
        with timed("generate"):
            tail = marker_filter.finish()
            written = "".join(shown) + tail
            if not marker_filter.cited and not is_refusal(written, refusal_text):
                supported = checker.best_supported(written)
                if supported is not None:  # an uncited answer gets its evident source
                    tail += f" [{supported}]"
                    marker_filter.cited.append(supported)
        if tail:
            shown.append(tail)
            yield AnswerDelta(tail)

    text = "".join(shown)
    refused = abstained or not text or is_refusal(text, refusal_text)
    with timed("generate"):  # resolving citations is part of the answer; untimed, it was ~10%
        citations = [] if refused else citations_for(marker_filter.cited, hits, text)
    yield AnswerDone(
        Answer(
            text=refusal_text if refused else text,
            citations=citations,
            refused=refused,
            prompt_tokens=prompt_tokens,
            model_id=llm.model_id,
            dropped_markers=marker_filter.dropped,
            refusal_probability=refusal_probability,
        )
    )


def answer_question(
    question: str,
    retrieval: RetrievalResult,
    llm: LLM,
    *,
    refusal_text: str,
    max_passages: int | None = None,
    max_passage_chars: int | None = None,
    abstain_threshold: float = 1.0,
) -> Answer:
    """The complete answer (the same text `stream_answer` streams)."""
    for event in stream_answer(
        question,
        retrieval,
        llm,
        refusal_text=refusal_text,
        max_passages=max_passages,
        max_passage_chars=max_passage_chars,
        abstain_threshold=abstain_threshold,
    ):
        if isinstance(event, AnswerDone):
            return event.answer
    raise RuntimeError("stream_answer ended without a final event")
