"""Cited answers for a tenant: answer cache, hybrid retrieval, generation, stage timings.

The cache key holds the tenant, the normalised question, k, the tenant's corpus version and the
configuration fingerprint, so any upload, replacement or deletion makes old answers unreachable.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from app.config import Settings
from app.errors import RagError, public_message
from app.generation.answer import Answer, AnswerDelta, AnswerDone, answer_question, stream_answer
from app.observability import error_payload
from app.services.container import Container
from app.services.search import check_question, resolve_k
from app.storage.cache import CacheKey, answer_cache_key
from app.timing import StageTimer, start_timer, timed

log = logging.getLogger(__name__)

StreamEvent = tuple[str, dict[str, Any]]


def _cache_key(container: Container, tenant_id: str, question: str, k: int) -> CacheKey:
    return answer_cache_key(
        tenant_id,
        question,
        k=k,
        corpus_version=container.corpus.corpus_version(tenant_id),
        config_fingerprint=container.config_fingerprint,
    )


def _payload(answer: Answer) -> dict[str, Any]:
    return {
        "answer": answer.text,
        "citations": [asdict(c) for c in answer.citations],
        "refused": answer.refused,
    }


def _finish(payload: dict[str, Any], cache: str, timer: StageTimer) -> dict[str, Any]:
    return {**payload, "cache": cache, "timings": timer.rounded(), "total_ms": timer.total_ms()}


def prepare(container: Container, question: str, k: int | None) -> tuple[str, int]:
    """The validated question and k (InvalidInput -> 422 before any work starts)."""
    return check_question(container, question), resolve_k(container, k)


def generation_limits(settings: Settings) -> dict[str, Any]:
    """The keyword arguments of `stream_answer` / `answer_question` that come from settings
    (one list, so the service, the evaluation and the benchmark answer alike)."""
    return {
        "refusal_text": settings.refusal_text,
        "max_passages": settings.llm_max_passages,
        "max_passage_chars": settings.llm_max_context_chars,
        "abstain_threshold": settings.llm_abstain_threshold,
    }


@dataclass
class Lookup:
    """A checked question and what the cache holds for it (`cached` is None on a miss).

    The request's stage timer starts here; run every later step in the same context.
    """

    tenant_id: str
    question: str
    k: int
    key: CacheKey
    cached: dict[str, Any] | None
    timer: StageTimer


def lookup(container: Container, tenant_id: str, question: str, k: int | None) -> Lookup:
    """Start timing, validate (InvalidInput -> 422 before any work) and consult the cache."""
    timer = start_timer()
    question, k = prepare(container, question, k)
    with timed("cache"):
        key = _cache_key(container, tenant_id, question, k)
        cached = container.cache.get(key)
    return Lookup(tenant_id, question, k, key, cached, timer)


def cached_answer(found: Lookup) -> dict[str, Any]:
    """The response body of a cache hit (no retrieval, no model)."""
    if found.cached is None:
        raise ValueError("cached_answer needs a cache hit")
    return _finish(found.cached, "hit", found.timer)


def generate_answer(container: Container, found: Lookup) -> dict[str, Any]:
    """Retrieve, generate and cache the answer of a cache miss (blocking: the model runs here)."""
    retrieval = container.retriever.search(found.tenant_id, found.question, found.k)
    result = answer_question(
        found.question, retrieval, container.llm, **generation_limits(container.settings)
    )
    payload = _payload(result)
    with timed("cache"):
        container.cache.set(found.key, payload)
    log.info(
        "answered",
        extra={
            "refused": result.refused,
            "citations": len(result.citations),
            "prompt_tokens": result.prompt_tokens,
        },
    )
    return _finish(payload, "miss", found.timer)


def cached_events(found: Lookup) -> Iterator[StreamEvent]:
    """The stream of a cache hit: the whole answer as one `token`, `citations`, `done`."""
    cached = found.cached
    if cached is None:
        raise ValueError("cached_events needs a cache hit")
    yield "token", {"text": cached["answer"]}
    yield "citations", {"citations": cached["citations"], "refused": cached["refused"]}
    yield "done", _finish({"refused": cached["refused"]}, "hit", found.timer)


def generated_events(container: Container, found: Lookup) -> Iterator[StreamEvent]:
    """Events `token` (text delta), `citations`, `done` (timings, cache) or `error` of a miss.

    Blocking at every step; closing the iterator stops the model and frees it at once.
    """
    try:
        retrieval = container.retriever.search(found.tenant_id, found.question, found.k)
        events = stream_answer(
            found.question, retrieval, container.llm, **generation_limits(container.settings)
        )
        try:
            for event in events:
                if isinstance(event, AnswerDelta):
                    yield "token", {"text": event.text}
                elif isinstance(event, AnswerDone):
                    payload = _payload(event.answer)
                    with timed("cache"):
                        container.cache.set(found.key, payload)
                    yield (
                        "citations",
                        {"citations": payload["citations"], "refused": payload["refused"]},
                    )
                    yield "done", _finish({"refused": payload["refused"]}, "miss", found.timer)
        finally:
            events.close()  # a client that left: the model's own generator closes now, not at GC
    except RagError as exc:
        log.warning("stream failed", extra={"code": exc.code, "detail": exc.message})
        yield "error", error_payload(exc.code, public_message(exc), exc.http_status)
    except Exception:
        log.exception("stream crashed")
        yield "error", error_payload("internal_error", "internal error; see server logs", 500)
