"""Grounded answers: retrieved passages in, a cited answer or the exact refusal out.

`stream_answer` is the one implementation; `final_answer` collects it, so streamed and
non-streamed answers are the same text by construction. When retrieval found nothing relevant the
model is not called at all.

Stages, timed by the orchestrator as `generate` (a paused client does not count): `ground` builds
the prompt and the marker checks (`GroundedPrompt`); each model delta updates a `Draft` and is
cleaned of invalid markers, unless the model hesitated and the answer abstains; `closing_text`
flushes the held-back end and gives an uncited answer its evident source; `settle` decides the
refusal and resolves the citations into the final `Answer`.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from app import metrics, tracing
from app.domain import RetrievalResult, SearchHit
from app.generation.citations import Citation, MarkerFilter, citations_for, is_refusal
from app.generation.focus import FocusRule, focus_passages
from app.generation.grounding import CitationChecker, embedding_similarity
from app.generation.prompt import build_request
from app.providers.types import LLM, ChatRequest, Embedder, LLMDelta
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


def shown_passages(
    question: str,
    hits: Sequence[SearchHit],
    *,
    max_passages: int | None = None,
    max_passage_chars: int | None = None,
    focus_chars: int = 0,
    focus_rule: FocusRule = "ranked",
    best_last: bool = False,
) -> list[SearchHit]:
    """What the model reads, in the order it reads it: the top `max_passages` hits within
    `max_passage_chars`, each cut to the question's best sentences (`focus_chars` in all, shared
    out by `focus_rule`) unless `focus_chars` is 0; with `best_last`, the best-ranked passage
    comes last, next to the question (a small model cites the passage it read last far more
    often than the first)."""
    hits = fit_passages(hits[:max_passages], max_passage_chars)
    shown = focus_passages(question, hits, focus_chars, focus_rule) if focus_chars else hits
    return shown[::-1] if best_last else shown


@dataclass(frozen=True)
class GroundedPrompt:
    """The request for a question over its passages, with the marker checks for its reply."""

    hits: list[SearchHit]
    request: ChatRequest
    checker: CitationChecker
    markers: MarkerFilter  # stateful: it sees the reply once, as it streams


@dataclass
class Draft:
    """The reply as the reader has seen it so far, and what the model reported on the way."""

    shown: list[str] = field(default_factory=list)
    prompt_tokens: int | None = None
    refusal_probability: float | None = None
    abstained: bool = False

    def note(self, delta: LLMDelta) -> None:
        """Keep the prompt size and refusal probability a delta reports."""
        if delta.prompt_tokens is not None:
            self.prompt_tokens = delta.prompt_tokens
        if delta.probe_probability is not None:
            self.refusal_probability = delta.probe_probability

    def hesitates(self, delta: LLMDelta, threshold: float) -> bool:
        """Whether, before any text was shown, the model was `threshold` likely to refuse."""
        probability = delta.probe_probability
        return probability is not None and not self.shown and probability >= threshold


def ground(
    question: str, hits: list[SearchHit], refusal_text: str, embedder: Embedder | None = None
) -> GroundedPrompt:
    """The prompt stage: the request and the checks its markers go through (with `embedder`,
    the embedder's check as well)."""
    texts = [hit.chunk.text for hit in hits]
    similarity = embedding_similarity(embedder, texts) if embedder is not None else None
    checker = CitationChecker(question, texts, similarity)
    return GroundedPrompt(
        hits=hits,
        request=build_request(question, hits, refusal_text),
        checker=checker,
        markers=MarkerFilter(len(hits), checker.repoint),
    )


def closing_text(prompt: GroundedPrompt, shown: str, refusal_text: str) -> str:
    """The held-back end of the reply, plus its evident source's marker if it cites none."""
    markers = prompt.markers
    tail = markers.finish()
    written = shown + tail
    if not markers.cited and not is_refusal(written, refusal_text):
        supported = prompt.checker.best_supported(written)
        if supported is not None:
            tail += f" {markers.cite(supported)}"
    return tail


def settle(prompt: GroundedPrompt, draft: Draft, refusal_text: str, model_id: str) -> Answer:
    """The final answer: the refusal when the reply is one (or empty), else cited text."""
    text = "".join(draft.shown)
    refused = draft.abstained or not text or is_refusal(text, refusal_text)
    citations = [] if refused else citations_for(prompt.markers.cited, prompt.hits, text)
    return Answer(
        text=refusal_text if refused else text,
        citations=citations,
        refused=refused,
        prompt_tokens=draft.prompt_tokens,
        model_id=model_id,
        dropped_markers=prompt.markers.dropped,
        refusal_probability=draft.refusal_probability,
    )


def _next_delta(deltas: Iterator[LLMDelta]) -> LLMDelta | None:
    with timed("generate"):
        return next(deltas, None)


def _close(deltas: Iterator[LLMDelta]) -> None:
    close = getattr(deltas, "close", None)
    if close is not None:
        close()  # a client that hangs up frees the model lock now


def stream_answer(
    question: str,
    retrieval: RetrievalResult,
    llm: LLM,
    *,
    refusal_text: str,
    max_passages: int | None = None,
    max_passage_chars: int | None = None,
    focus_chars: int = 0,
    focus_rule: FocusRule = "ranked",
    best_last: bool = False,
    abstain_threshold: float = 1.0,
    embedder: Embedder | None = None,
) -> Generator[AnswerEvent, None, None]:
    """Yield cleaned text deltas, then one AnswerDone with citations and the refusal flag
    (`embedder`: the one the citation check compares claims and passages with, if any).

    When the model's first delta says it was at least `abstain_threshold` likely to start the
    refusal sentence, the generation is stopped before any text is shown and the answer is the
    refusal: a small model that hesitates between answering and refusing is usually guessing.
    """
    hits: list[SearchHit] = []
    if retrieval.relevant and retrieval.hits:
        with timed("generate"):  # choosing and cutting the passages is part of it
            hits = shown_passages(
                question,
                retrieval.hits,
                max_passages=max_passages,
                max_passage_chars=max_passage_chars,
                focus_chars=focus_chars,
                focus_rule=focus_rule,
                best_last=best_last,
            )
    if not hits:
        yield AnswerDelta(refusal_text)
        yield AnswerDone(Answer(refusal_text, refused=True, model_id=llm.model_id))
        return

    with timed("generate"):  # preparing the prompt and the marker checks is part of it
        prompt = ground(question, hits, refusal_text, embedder)
    draft = Draft()
    asked = time.perf_counter()
    call = tracing.start("llm.generate", llm__model=llm.model_id)
    deltas = iter(llm.stream(prompt.request))
    pieces = 0
    try:
        while (delta := _next_delta(deltas)) is not None:
            if pieces == 0:
                metrics.llm_first_token(time.perf_counter() - asked)
            pieces += 1
            draft.note(delta)
            if draft.hesitates(delta, abstain_threshold):
                draft.abstained = True
                break
            with timed("generate"):
                text = prompt.markers.feed(delta.text)
            if text:
                draft.shown.append(text)
                yield AnswerDelta(text)
    finally:
        _close(deltas)
        # Each streamed piece is one token for llama.cpp and the OpenAI-compatible servers.
        metrics.llm_tokens(draft.prompt_tokens, pieces)
        tracing.finish(call, llm__prompt_tokens=draft.prompt_tokens, llm__completion_tokens=pieces)

    if draft.abstained:
        tail = refusal_text
    else:
        with timed("generate"):
            tail = closing_text(prompt, "".join(draft.shown), refusal_text)
    if tail:
        draft.shown.append(tail)
        yield AnswerDelta(tail)
    with timed("generate"):  # resolving citations is part of the answer; untimed, it was ~10%
        answer = settle(prompt, draft, refusal_text, llm.model_id)
    yield AnswerDone(answer)


def final_answer(events: Iterable[AnswerEvent]) -> Answer:
    """The complete answer of a `stream_answer` stream (the text it streams)."""
    for event in events:
        if isinstance(event, AnswerDone):
            return event.answer
    raise RuntimeError("stream_answer ended without a final event")
