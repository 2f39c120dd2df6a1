"""Retrieval-only search and cited answers (plain and streamed) for the caller's tenant."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from starlette.types import Send

from app.api.deps import ContainerDep, Principal, QueryRateLimit
from app.api.errors import error_responses
from app.api.schemas import QueryIn, QueryOut, SearchIn, SearchOut, SearchResultOut
from app.services import answer_lane
from app.services.admission import Caller
from app.services.answer_lane import AnswerStream
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
async def query(body: QueryIn, container: ContainerDep, principal: Principal) -> QueryOut:
    """A short answer whose claims carry [n] markers resolving to file and page."""
    caller = Caller(principal.tenant_id, principal.user_id)
    return QueryOut(**await answer_lane.answer(container, caller, body.question, body.k))


def _sse(event: str, data: dict[str, object]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def _encoded(events: AnswerStream) -> AsyncIterator[bytes]:
    async for event, data in events:
        yield _sse(event, data)


class EventStreamResponse(StreamingResponse):
    """Server-sent events of an admitted answer; the answer is closed however the response
    ends (done, error, or the client hanging up), which stops the model and frees its slots."""

    def __init__(self, events: AnswerStream) -> None:
        super().__init__(
            _encoded(events),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._events = events

    async def stream_response(self, send: Send) -> None:
        """Send the events, then close the answer even when cancelled by a disconnect."""
        try:
            await super().stream_response(send)
        finally:
            await self._events.aclose()


@router.post(
    "/query/stream",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "SSE events"}},
)
async def query_stream(
    body: QueryIn, container: ContainerDep, principal: Principal
) -> StreamingResponse:
    """Server-sent events: `token` deltas, then `citations`, then `done`; or `error`."""
    caller = Caller(principal.tenant_id, principal.user_id)
    events = await answer_lane.open_stream(container, caller, body.question, body.k)
    return EventStreamResponse(events)
