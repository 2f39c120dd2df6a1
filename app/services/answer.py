"""Cited answers for a tenant: answer cache, hybrid retrieval, generation, stage timings.

The cache key holds the tenant, the normalised question, k, the tenant's corpus version and the
configuration fingerprint, so any upload, replacement or deletion makes old answers unreachable.

Results are typed (`AnsweredQuestion`, and the `AnswerEvent`s of a stream); the routes turn them
into the JSON body and the server-sent events.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

import anyio

from app import metrics
from app.errors import RagError, public_message
from app.generation.answer_limits import GenerationLimits
from app.generation.citations import Citation
from app.generation.grounded_answer import AnswerDelta, AnswerDone
from app.request_limits import RequestLimits
from app.retrieval.scope import EVERYTHING, SearchScope
from app.services.blocks.admission import Caller, ConcurrencyLimiter, Slot
from app.services.blocks.answer_lane import AnswerLane, AnswerStream, Step
from app.services.blocks.answer_log import (
    AskedAs,
    FinishedAnswer,
    new_answer_id,
    retrieved_ranks,
)
from app.storage.cache import AnswerCache, CacheKey, answer_cache_key
from app.timing import StageTimer, start_timer, timed

if TYPE_CHECKING:
    from app.domain import RetrievalResult
    from app.providers.types import LLM, Embedder
    from app.retrieval.hybrid import HybridRetriever
    from app.services.blocks.answer_log import AnswerLog

log = logging.getLogger(__name__)

CacheStatus = Literal["hit", "miss"]
_CITATION_FIELDS = tuple(field.name for field in fields(Citation))


@dataclass(frozen=True)
class AnswerDeps:
    """What answering needs, built once per process by the container."""

    retriever: HybridRetriever
    llm: LLM
    cache: AnswerCache
    corpus_version: Callable[[str], int]  # tenant -> version, bumped by every corpus change
    config_fingerprint: str
    limits: RequestLimits
    generation: GenerationLimits
    answer_log: AnswerLog | None = None  # the per-tenant answer record (None: not kept)
    embedder: Embedder | None = None  # the citation check compares claims and passages with it


@dataclass(frozen=True)
class CachedAnswer:
    """The part of an answer the cache keeps: the text, its citations, whether it refused, and
    the documents retrieval ranked for it (so a cache hit's record names them too)."""

    text: str
    citations: list[Citation]
    refused: bool
    retrieved: list[dict[str, Any]] = field(default_factory=list)

    def to_cache(self) -> dict[str, Any]:
        """The stored form (plain JSON values)."""
        return {
            "answer": self.text,
            "citations": [asdict(c) for c in self.citations],
            "refused": self.refused,
            "retrieved": self.retrieved,
        }

    @classmethod
    def from_cache(cls, stored: Mapping[str, Any]) -> CachedAnswer:
        """Read back a stored form (unknown citation keys are ignored; an entry cached before
        answers kept their retrieved documents reads back with none)."""
        citations = [
            Citation(**{name: c[name] for name in _CITATION_FIELDS if name in c})
            for c in stored["citations"]
        ]
        retrieved = list(stored.get("retrieved", []))
        return cls(stored["answer"], citations, bool(stored["refused"]), retrieved)


@dataclass(frozen=True)
class Question:
    """A question to answer: who asks, its text, the passages wanted (None: RAG_TOP_K), where to
    search, and for a rewritten question how it was typed (`asked_as`, for the answer record)."""

    caller: Caller
    text: str
    k: int | None = None
    scope: SearchScope = EVERYTHING
    asked_as: AskedAs | None = None


@dataclass(frozen=True)
class AnsweredQuestion:
    """A finished answer: text, citations, refusal, where it came from and the stage timings."""

    answer: str
    citations: list[Citation]
    refused: bool
    cache: CacheStatus
    timings: dict[str, float]
    total_ms: float
    answer_id: str = ""  # what feedback names (POST /answers/{answer_id}/feedback)


@dataclass(frozen=True)
class TextDelta:
    """More answer text (a cache hit sends the whole text as one delta)."""

    text: str


@dataclass(frozen=True)
class CitationsFound:
    """The finished answer's citations, after the last delta."""

    citations: list[Citation]
    refused: bool


@dataclass(frozen=True)
class AnswerFinished:
    """The answer is complete: cache status and stage timings."""

    refused: bool
    cache: CacheStatus
    timings: dict[str, float]
    total_ms: float
    answer_id: str = ""


@dataclass(frozen=True)
class AnswerFailed:
    """The answer stopped on an error; `message` is safe to show the client."""

    code: str
    message: str
    http_status: int


AnswerEvent = TextDelta | CitationsFound | AnswerFinished | AnswerFailed


@dataclass
class Lookup:
    """A checked question and what the cache holds for it (`cached` is None on a miss).

    The request's stage timer starts here; run every later step in the same context.
    """

    tenant_id: str
    question: str
    k: int
    key: CacheKey
    cached: CachedAnswer | None
    timer: StageTimer
    scope: SearchScope = EVERYTHING  # what retrieval may see (the cache key holds it)
    user_id: str = ""
    corpus_version: int = 0
    answer_id: str = ""
    asked_as: AskedAs | None = None  # a conversation's rewritten question: how it was typed


def lookup(
    deps: AnswerDeps,
    *,
    tenant_id: str,
    question: str,
    k: int | None,
    scope: SearchScope = EVERYTHING,
    user_id: str = "",
) -> Lookup:
    """Start timing, validate (InvalidInput -> 422 before any work) and consult the cache of
    answers retrieved within the same scope."""
    timer = start_timer()
    question, k = deps.limits.question(question), deps.limits.k(k)
    with timed("cache"):
        version = deps.corpus_version(tenant_id)
        key = answer_cache_key(
            tenant_id,
            question,
            k=k,
            corpus_version=version,
            config_fingerprint=deps.config_fingerprint,
            scope_key=scope.key,
        )
        stored = deps.cache.get(key)
    metrics.cache_request(stored is not None)
    cached = CachedAnswer.from_cache(stored) if stored is not None else None
    return Lookup(
        tenant_id, question, k, key, cached, timer, scope, user_id, version, new_answer_id()
    )


def _record(deps: AnswerDeps, found: Lookup, answer: CachedAnswer, cache: CacheStatus) -> None:
    """Write the answer's record (its timings as the caller sees them)."""
    if deps.answer_log is None or not found.user_id:
        return
    finished = FinishedAnswer(
        answer_id=found.answer_id,
        tenant_id=found.tenant_id,
        user_id=found.user_id,
        question=found.question,
        citations=answer.citations,
        refused=answer.refused,
        cache=cache,
        timings=found.timer.rounded(),
        total_ms=found.timer.total_ms(),
        corpus_version=found.corpus_version,
        retrieved=answer.retrieved,
        asked_as=found.asked_as,
    )
    deps.answer_log.record(finished)


def _answered(answer: CachedAnswer, cache: CacheStatus, found: Lookup) -> AnsweredQuestion:
    timings, total_ms = found.timer.rounded(), found.timer.total_ms()
    return AnsweredQuestion(
        answer.text, answer.citations, answer.refused, cache, timings, total_ms, found.answer_id
    )


def _finished(refused: bool, cache: CacheStatus, found: Lookup) -> AnswerFinished:
    timings, total_ms = found.timer.rounded(), found.timer.total_ms()
    return AnswerFinished(refused, cache, timings, total_ms, found.answer_id)


def _count(found: Lookup, outcome: str) -> None:
    timer = found.timer
    metrics.answer(outcome, found.tenant_id, timer.stages, timer.total_ms())


def _outcome(refused: bool, retrieval: RetrievalResult) -> str:
    """answered, or who refused: the relevance gate (no passage reached the model) or the model."""
    if not refused:
        return metrics.ANSWERED
    if retrieval.relevant and retrieval.hits:
        return metrics.REFUSED_BY_MODEL
    return metrics.REFUSED_BY_GATE


def cached_answer(deps: AnswerDeps, found: Lookup) -> AnsweredQuestion:
    """The answer of a cache hit (no retrieval, no model)."""
    if found.cached is None:
        raise ValueError("cached_answer needs a cache hit")
    _count(found, metrics.CACHE_HIT)
    _record(deps, found, found.cached, "hit")
    return _answered(found.cached, "hit", found)


def _store(deps: AnswerDeps, found: Lookup, answer: CachedAnswer) -> None:
    with timed("cache"):
        deps.cache.set(found.key, answer.to_cache())


def generate_answer(deps: AnswerDeps, found: Lookup) -> AnsweredQuestion:
    """Retrieve, generate and cache the answer of a cache miss (blocking: the model runs here)."""
    try:
        retrieval = deps.retriever.search(
            found.tenant_id, found.question, found.k, scope=found.scope
        )
        result = deps.generation.answer(found.question, retrieval, deps.llm, deps.embedder)
        answer = CachedAnswer(
            result.text, list(result.citations), result.refused, retrieved_ranks(retrieval)
        )
        _store(deps, found, answer)
    except Exception:
        _count(found, metrics.ERROR)
        raise
    _count(found, _outcome(result.refused, retrieval))
    log.info(
        "answered",
        extra={
            "refused": result.refused,
            "citations": len(result.citations),
            "prompt_tokens": result.prompt_tokens,
        },
    )
    _record(deps, found, answer, "miss")
    return _answered(answer, "miss", found)


def cached_events(deps: AnswerDeps, found: Lookup) -> Iterator[AnswerEvent]:
    """The stream of a cache hit: the whole answer as one delta, its citations, the end."""
    cached = found.cached
    if cached is None:
        raise ValueError("cached_events needs a cache hit")
    yield TextDelta(cached.text)
    yield CitationsFound(cached.citations, cached.refused)
    _count(found, metrics.CACHE_HIT)
    _record(deps, found, cached, "hit")
    yield _finished(cached.refused, "hit", found)


def generated_events(deps: AnswerDeps, found: Lookup) -> Iterator[AnswerEvent]:
    """Text deltas, then citations and the end (timings, cache) of a miss; or a failure.

    Blocking at every step; closing the iterator stops the model and frees it at once.
    """
    try:
        retrieval = deps.retriever.search(
            found.tenant_id, found.question, found.k, scope=found.scope
        )
        events = deps.generation.stream(found.question, retrieval, deps.llm, deps.embedder)
        try:
            for event in events:
                if isinstance(event, AnswerDelta):
                    yield TextDelta(event.text)
                elif isinstance(event, AnswerDone):
                    done = event.answer
                    answer = CachedAnswer(
                        done.text, list(done.citations), done.refused, retrieved_ranks(retrieval)
                    )
                    _store(deps, found, answer)
                    yield CitationsFound(answer.citations, answer.refused)
                    _count(found, _outcome(answer.refused, retrieval))
                    _record(deps, found, answer, "miss")
                    yield _finished(answer.refused, "miss", found)
        finally:
            events.close()  # a client that left: the model's own generator closes now, not at GC
    except RagError as exc:
        log.warning("stream failed", extra={"code": exc.code, "detail": exc.message})
        _count(found, metrics.ERROR)
        yield AnswerFailed(exc.code, public_message(exc), exc.http_status)
    except Exception:
        log.exception("stream crashed")
        _count(found, metrics.ERROR)
        yield AnswerFailed("internal_error", "internal error; see server logs", 500)


# Behind admission control, on the answer lane's threads (see `app.services.blocks.answer_lane`).


async def _inline(step: Step, *args: Any) -> Any:
    return step(*args)


async def _lookup(deps: AnswerDeps, context: contextvars.Context, asked: Question) -> Lookup:
    # On the default threadpool: a few milliseconds of validation, database and cache reads.
    found: Lookup = await anyio.to_thread.run_sync(
        context.run,
        functools.partial(
            lookup,
            deps,
            tenant_id=asked.caller.tenant_id,
            question=asked.text,
            k=asked.k,
            scope=asked.scope,
            user_id=asked.caller.user_id,
        ),
    )
    found.asked_as = asked.asked_as
    return found


async def _admit(limiter: ConcurrencyLimiter, caller: Caller, timer: StageTimer) -> Slot:
    """An answer slot; time spent queued shows up as the `queue` stage."""
    started = time.perf_counter()
    slot = await limiter.acquire(caller)
    if slot.queued:
        timer.record("queue", (time.perf_counter() - started) * 1000.0)
    return slot


async def answer(lane: AnswerLane, deps: AnswerDeps, asked: Question) -> AnsweredQuestion:
    """The answer within the question's scope; a cache hit at once, a miss after admission
    (Overloaded: 429/503)."""
    context = contextvars.copy_context()
    found = await _lookup(deps, context, asked)
    if found.cached is not None:
        return cached_answer(deps, found)
    slot = await _admit(lane.answers, asked.caller, found.timer)
    try:
        result: AnsweredQuestion = await lane.run(context, generate_answer, deps, found)
        return result
    finally:
        slot.release()


async def open_stream(
    lane: AnswerLane, deps: AnswerDeps, asked: Question
) -> AnswerStream[AnswerEvent]:
    """An admitted answer stream within the question's scope (Overloaded: 429/503 before any
    byte is sent)."""
    slots = [await lane.streams.acquire(asked.caller)]
    try:
        context = contextvars.copy_context()
        found = await _lookup(deps, context, asked)
        if found.cached is not None:
            stream = AnswerStream(cached_events(deps, found), slots, _inline)
        else:
            slots.append(await _admit(lane.answers, asked.caller, found.timer))
            events = generated_events(deps, found)  # starts on its first step

            async def on_lane(step: Step, *args: Any) -> Any:
                return await lane.run(context, step, *args)

            stream = AnswerStream(events, slots, on_lane)
        stream.answer_id = found.answer_id
        return stream
    except BaseException:
        for slot in slots:
            slot.release()
        raise
