"""Cited answers for a tenant: answer cache, hybrid retrieval, generation, stage timings.

The cache key holds the tenant, the normalised question, k, the tenant's corpus version and the
configuration fingerprint, so any upload, replacement or deletion makes old answers unreachable.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import asdict
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
        corpus_version=container.store.corpus_version(tenant_id),
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


def answer(container: Container, tenant_id: str, question: str, k: int | None) -> dict[str, Any]:
    """The answer with citations, refusal flag, cache status and per-stage timings."""
    timer = start_timer()
    question, k = prepare(container, question, k)
    with timed("cache"):
        key = _cache_key(container, tenant_id, question, k)
        cached = container.cache.get(key)
    if cached is not None:
        return _finish(cached, "hit", timer)
    retrieval = container.retriever.search(tenant_id, question, k)
    result = answer_question(
        question, retrieval, container.llm, **generation_limits(container.settings)
    )
    payload = _payload(result)
    with timed("cache"):
        container.cache.set(key, payload)
    log.info(
        "answered",
        extra={
            "refused": result.refused,
            "citations": len(result.citations),
            "prompt_tokens": result.prompt_tokens,
        },
    )
    return _finish(payload, "miss", timer)


def stream(container: Container, tenant_id: str, question: str, k: int) -> Iterator[StreamEvent]:
    """Events `token` (text delta), `citations`, `done` (timings, cache) or `error`.

    Call `prepare` first; run the whole iteration in one context so the stage timer persists.
    """
    timer = start_timer()
    try:
        with timed("cache"):
            key = _cache_key(container, tenant_id, question, k)
            cached = container.cache.get(key)
        if cached is not None:
            yield "token", {"text": cached["answer"]}
            yield "citations", {"citations": cached["citations"], "refused": cached["refused"]}
            yield "done", _finish({"refused": cached["refused"]}, "hit", timer)
            return
        retrieval = container.retriever.search(tenant_id, question, k)
        events = stream_answer(
            question, retrieval, container.llm, **generation_limits(container.settings)
        )
        for event in events:
            if isinstance(event, AnswerDelta):
                yield "token", {"text": event.text}
            elif isinstance(event, AnswerDone):
                payload = _payload(event.answer)
                with timed("cache"):
                    container.cache.set(key, payload)
                yield (
                    "citations",
                    {"citations": payload["citations"], "refused": payload["refused"]},
                )
                yield "done", _finish({"refused": payload["refused"]}, "miss", timer)
    except RagError as exc:
        log.warning("stream failed", extra={"code": exc.code, "detail": exc.message})
        yield "error", error_payload(exc.code, public_message(exc), exc.http_status)
    except Exception:
        log.exception("stream crashed")
        yield "error", error_payload("internal_error", "internal error; see server logs", 500)
