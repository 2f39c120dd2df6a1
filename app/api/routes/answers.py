"""Retrieval-only search and cited answers (plain and streamed) for the caller's tenant."""

from __future__ import annotations

import contextvars
import json
from collections.abc import AsyncIterator, Iterator

import anyio
from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from app.api.deps import ContainerDep, Principal, QueryRateLimit
from app.api.errors import error_responses
from app.api.schemas import QueryIn, QueryOut, SearchIn, SearchOut, SearchResultOut
from app.services import answer as answer_service
from app.services.search import search as search_service
from app.timing import start_timer

router = APIRouter(
    tags=["retrieval"],
    dependencies=[QueryRateLimit],
    responses=error_responses(409, 422, 429, 503),
)


@router.post("/search", response_model=SearchOut)
def search(body: SearchIn, container: ContainerDep, principal: Principal) -> SearchOut:
    """Ranked chunks with the evidence of every retrieval stage (no LLM)."""
    timer = start_timer()
    result = search_service(container, principal.tenant_id, body.query, body.k)
    results = [
        SearchResultOut(
            rank=rank,
            document_id=hit.chunk.document_id,
            source=hit.chunk.source,
            page=hit.chunk.page,
            page_label=hit.chunk.page_label,
            page_role=hit.chunk.page_role,
            text=hit.chunk.text,
            score=hit.score,
            stages=hit.stages,
        )
        for rank, hit in enumerate(result.hits, start=1)
    ]
    return SearchOut(
        results=results,
        relevant=result.relevant,
        timings=timer.rounded(),
        total_ms=timer.total_ms(),
    )


@router.post("/query", response_model=QueryOut)
def query(body: QueryIn, container: ContainerDep, principal: Principal) -> QueryOut:
    """A short answer whose claims carry [n] markers resolving to file and page."""
    return QueryOut(**answer_service.answer(container, principal.tenant_id, body.question, body.k))


def _sse(event: str, data: dict[str, object]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def _in_one_context(events: Iterator[tuple[str, dict[str, object]]]) -> AsyncIterator[bytes]:
    """Run a blocking event iterator in worker threads, every step in the same context."""
    context = contextvars.copy_context()

    def step() -> tuple[str, dict[str, object]] | None:
        return context.run(next, events, None)

    while (item := await anyio.to_thread.run_sync(step)) is not None:
        yield _sse(*item)


@router.post(
    "/query/stream",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "SSE events"}},
)
def query_stream(body: QueryIn, container: ContainerDep, principal: Principal) -> StreamingResponse:
    """Server-sent events: `token` deltas, then `citations`, then `done`; or `error`."""
    question, k = answer_service.prepare(container, body.question, body.k)
    events = answer_service.stream(container, principal.tenant_id, question, k)
    return StreamingResponse(
        _in_one_context(events),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
