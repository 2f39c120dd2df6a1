"""Conversations of the caller: follow-up questions answered with citations, turn by turn."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from app.api.conversation_schemas import (
    ConversationDetail,
    ConversationIn,
    ConversationOut,
    MessageIn,
    TurnOut,
    rewrite_fields,
)
from app.api.deps import (
    ConversationRateLimit,
    Conversations,
    ConversationTurns,
    PageOffset,
    PageSize,
    Principal,
    QueryRateLimit,
    ReadableDocuments,
    ScopeOf,
)
from app.api.errors import error_responses
from app.api.openapi import content_response
from app.api.records import Page
from app.api.routes.answers import EventStreamResponse, wire_event
from app.api.streams import EVENT_STREAM
from app.services import conversations as service
from app.services.conversations import (
    QuestionRewritten,
    TurnEvent,
    TurnFinished,
)

router = APIRouter(tags=["conversations"])


def _wire_turn_event(event: TurnEvent) -> tuple[str, dict[str, Any]]:
    """The SSE name and data of a turn event: /query/stream's, plus `standalone` first and the
    turn's message ids in `done`."""
    if isinstance(event, QuestionRewritten):
        return "standalone", rewrite_fields(event.rewrite)
    if isinstance(event, TurnFinished):
        name, data = wire_event(event.finished)
        return name, {**data, **asdict(event.stored)}
    return wire_event(event)


@router.post(
    "/conversations",
    status_code=201,
    response_model=ConversationOut,
    dependencies=[ConversationRateLimit],
    responses=error_responses(413, 422, 429),
)
def create_conversation(
    principal: Principal, store: Conversations, body: ConversationIn | None = None
) -> ConversationOut:
    """Start an empty conversation, titled as asked or else by its first question; its id
    takes follow-up questions (413 `quota_exceeded` when the caller has
    RAG_QUOTA_CONVERSATIONS_PER_USER of them)."""
    title = body.title if body is not None and body.title is not None else ""
    return ConversationOut.model_validate(service.start(store, principal.as_caller(), title))


@router.get("/conversations", response_model=Page[ConversationOut], responses=error_responses(422))
def list_conversations(
    principal: Principal, store: Conversations, size: PageSize, offset: PageOffset = 0
) -> Page[ConversationOut]:
    """The caller's conversations, most recently used first."""
    found = service.list_conversations(store, principal.as_caller(), size, offset)
    return Page[ConversationOut].of(found.records, found.total)


@router.get(
    "/conversations/{conversation_id}",
    response_model=ConversationDetail,
    responses=error_responses(404, 422),
)
def get_conversation(
    conversation_id: str,
    principal: Principal,
    store: Conversations,
    readable: ReadableDocuments,
) -> ConversationDetail:
    """The conversation with its kept messages; each answer with its own citations."""
    caller = principal.as_caller()
    record = service.get(store, caller, conversation_id=conversation_id)
    history = service.messages(store, caller, conversation_id=conversation_id)
    # Re-checked as shown (service.visible_history).
    shown = service.visible_history(history, readable)
    return ConversationDetail.model_validate({**asdict(record), "history": shown})


@router.delete(
    "/conversations/{conversation_id}", status_code=204, responses=error_responses(404, 422)
)
def delete_conversation(
    conversation_id: str, principal: Principal, store: Conversations
) -> Response:
    """Delete the conversation and every message of it."""
    service.delete(store, principal.as_caller(), conversation_id=conversation_id)
    return Response(status_code=204)


@router.post(
    "/conversations/{conversation_id}/messages",
    response_model=TurnOut,
    dependencies=[QueryRateLimit],
    responses={
        **content_response(
            "the answer; with ?stream=true, SSE events `standalone`, `token`, `citations`, "
            "`done` (with the turn's message ids) or `error`",
            EVENT_STREAM,
        ),
        **error_responses(404, 409, 413, 422, 429, 503),
    },
)
async def post_message(
    conversation_id: str,
    body: MessageIn,
    principal: Principal,
    deps: ConversationTurns,
    scope_of: ScopeOf,
    readable: ReadableDocuments,
    stream: Annotated[bool, Query(description="answer as server-sent events")] = False,
) -> TurnOut | StreamingResponse:
    """Ask a question in the conversation: a follow-up is rewritten into a standalone question
    from the latest turns, answered like /query, and the turn is stored with its citations."""
    caller = principal.as_caller()
    # What the caller reads now: a follow-up never cites a document it can no longer read.
    scope = await run_in_threadpool(scope_of, body.collections, body.filters)
    asked = service.TurnQuestion(conversation_id, body.content, body.k, scope, readable)
    if stream:
        events = await service.open_turn_stream(deps, caller, asked)
        return EventStreamResponse(events, _wire_turn_event)
    return TurnOut.model_validate(await service.ask(deps, caller, asked))
