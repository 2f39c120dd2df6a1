"""Retrieval-only search and cited answers (plain and streamed) for the caller's tenant."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from app.api.deps import (
    AnswerLaneDep,
    Answers,
    Limits,
    Principal,
    QueryRateLimit,
    Retriever,
    ScopeOf,
)
from app.api.errors import error_responses
from app.api.openapi import content_response
from app.api.schemas import QueryIn, QueryOut, SearchIn, SearchOut, SearchResultOut
from app.api.streams import EVENT_STREAM, AnswerStreamResponse, ClosableEvents
from app.domain import SearchHit, ocr_confidence, section_path, text_source
from app.observability import error_payload
from app.services import answer as answer_service
from app.services.answer import (
    AnswerEvent,
    AnswerFailed,
    AnswerFinished,
    CitationsFound,
    TextDelta,
)
from app.services.blocks.search_explain import hit_explanation, result_explanation
from app.services.search import search as search_service
from app.timing import start_timer, timed

router = APIRouter(
    tags=["retrieval"],
    dependencies=[QueryRateLimit],
    responses=error_responses(404, 409, 422, 429, 503),  # 404: a collection you do not read
)


@router.post("/search", response_model=SearchOut)
def search(
    body: SearchIn,
    principal: Principal,
    retriever: Retriever,
    limits: Limits,
    scope_of: ScopeOf,
) -> SearchOut:
    """Ranked chunks (or documents, `group=document`) with the evidence of every retrieval
    stage (no LLM)."""
    timer = start_timer()
    with timed("scope"):
        scope = scope_of(body.collections, body.filters)
    tokenizer = retriever.keyword_index.tokenizer

    def explained(hit: SearchHit) -> dict[str, Any]:
        return hit_explanation(hit, result, tokenizer, body.query)

    result = search_service(
        retriever,
        limits,
        tenant_id=principal.tenant_id,
        query=body.query,
        k=body.k,
        group=body.group,
        scope=scope,
    )
    results = [
        SearchResultOut(
            rank=rank,
            chunk_id=hit.chunk.id,
            document_id=hit.chunk.document_id,
            source=hit.chunk.source,
            page=hit.chunk.page,
            page_label=hit.chunk.page_label,
            page_role=hit.chunk.page_role,
            section=section_path(hit.chunk),
            text=hit.chunk.text,
            text_source=text_source(hit.chunk),
            ocr_confidence=ocr_confidence(hit.chunk),
            score=hit.score,
            stages=hit.stages,
            explain=explained(hit) if body.explain else None,
            **(document_counts(hit) if body.group == "document" else {}),
        )
        for rank, hit in enumerate(result.hits, start=1)
    ]
    return SearchOut(
        group=body.group,
        results=results,
        relevant=result.relevant,
        explain=result_explanation(result) if body.explain else None,
        timings=timer.rounded(),
        total_ms=timer.total_ms(),
    )


def document_counts(hit: SearchHit) -> dict[str, Any]:
    """`other_chunks` and `other_pages` of a hit standing for its document."""
    pages = dict.fromkeys(c.page for c in hit.same_document if c.page != hit.chunk.page)
    return {"other_chunks": len(hit.same_document), "other_pages": list(pages)}


async def asked_question(
    body: QueryIn, principal: Principal, scope_of: ScopeOf
) -> answer_service.Question:
    """The question of a /query body, asked by the caller within the collections and filters
    the body names."""
    scope = await run_in_threadpool(scope_of, body.collections, body.filters)
    return answer_service.Question(principal.as_caller(), body.question, body.k, scope)


AskedQuestion = Annotated[answer_service.Question, Depends(asked_question)]


@router.post("/query", response_model=QueryOut)
async def query(lane: AnswerLaneDep, deps: Answers, asked: AskedQuestion) -> QueryOut:
    """A short answer whose claims carry [n] markers resolving to file and page."""
    return QueryOut.model_validate(await answer_service.answer(lane, deps, asked))


def wire_event(event: AnswerEvent) -> tuple[str, dict[str, Any]]:
    """The SSE name and data of an answer event (the stream's wire format)."""
    if isinstance(event, TextDelta):
        return "token", {"text": event.text}
    if isinstance(event, CitationsFound):
        citations = [asdict(c) for c in event.citations]
        return "citations", {"citations": citations, "refused": event.refused}
    if isinstance(event, AnswerFinished):
        return "done", {
            "refused": event.refused,
            "cache": event.cache,
            "timings": event.timings,
            "total_ms": event.total_ms,
            "answer_id": event.answer_id,
        }
    if isinstance(event, AnswerFailed):
        return "error", error_payload(event.code, event.message, event.http_status)
    raise TypeError(f"not an answer event: {event!r}")


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


WireEvent = Callable[[Any], tuple[str, dict[str, Any]]]


async def _encoded(events: ClosableEvents, wire: WireEvent) -> AsyncIterator[bytes]:
    async for event in events:
        yield _sse(*wire(event))


class EventStreamResponse(AnswerStreamResponse):
    """Server-sent events of an admitted answer; `wire` names each event and gives its data
    (`wire_event` for an answer's own events)."""

    def __init__(self, events: ClosableEvents, wire: WireEvent = wire_event) -> None:
        super().__init__(events, _encoded(events, wire))


@router.post(
    "/query/stream",
    response_class=StreamingResponse,
    responses=content_response("SSE events", EVENT_STREAM),
)
async def query_stream(
    lane: AnswerLaneDep, deps: Answers, asked: AskedQuestion
) -> StreamingResponse:
    """Server-sent events: `token` deltas, then `citations`, then `done`; or `error`."""
    return EventStreamResponse(await answer_service.open_stream(lane, deps, asked))
