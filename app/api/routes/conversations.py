"""Conversations of the caller: follow-up questions answered with citations, turn by turn."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.responses import StreamingResponse

from app.api.conversation_schemas import (
    ConversationDetail,
    ConversationList,
    ConversationOut,
    MessageIn,
    MessageOut,
    TurnOut,
)
from app.api.deps import (
    ContainerDep,
    ConversationRateLimit,
    PageLimit,
    PageOffset,
    Principal,
    QueryRateLimit,
)
from app.api.errors import error_responses
from app.api.routes.answers import EventStreamResponse, query_out, wire_event
from app.api.schemas import CitationOut
from app.services import conversations as service
from app.services.blocks.admission import Caller
from app.services.blocks.followups import Rewrite
from app.services.conversations import (
    AnsweredTurn,
    QuestionRewritten,
    TurnEvent,
    TurnFinished,
)
from app.storage.conversations import ConversationRecord, MessageRecord

router = APIRouter(tags=["conversations"])


def _caller(principal: Principal) -> Caller:
    return Caller(principal.tenant_id, principal.user_id)


def _conversation_out(record: ConversationRecord) -> ConversationOut:
    return ConversationOut(
        conversation_id=record.conversation_id,
        title=record.title,
        messages=record.messages,
        created_at=record.created_at.isoformat(),
        updated_at=record.updated_at.isoformat(),
    )


def _message_out(message: MessageRecord) -> MessageOut:
    return MessageOut(
        message_id=message.message_id,
        role=message.role,
        content=message.content,
        standalone_question=message.standalone_question,
        citations=(
            None
            if message.citations is None
            else [CitationOut(**citation) for citation in message.citations]
        ),
        refused=message.refused,
        created_at=message.created_at.isoformat(),
    )


def _rewrite_fields(rewrite: Rewrite) -> dict[str, Any]:
    return {
        "standalone_question": rewrite.question,
        "rewrite": rewrite.method,
        "rewrite_ms": round(rewrite.llm_ms, 2),
    }


def _turn_out(turn: AnsweredTurn) -> TurnOut:
    return TurnOut(
        **dict(query_out(turn.answered)),
        **asdict(turn.stored),
        **_rewrite_fields(turn.rewrite),
    )


def _wire_turn_event(event: TurnEvent) -> tuple[str, dict[str, Any]]:
    """The SSE name and data of a turn event: /query/stream's, plus `standalone` first and the
    turn's message ids in `done`."""
    if isinstance(event, QuestionRewritten):
        return "standalone", _rewrite_fields(event.rewrite)
    if isinstance(event, TurnFinished):
        name, data = wire_event(event.finished)
        return name, {**data, **asdict(event.stored)}
    return wire_event(event)


@router.post(
    "/conversations",
    status_code=201,
    response_model=ConversationOut,
    dependencies=[ConversationRateLimit],
    responses=error_responses(413, 429),
)
def create_conversation(container: ContainerDep, principal: Principal) -> ConversationOut:
    """Start an empty conversation; its id takes follow-up questions (413 `quota_exceeded`
    when the caller has RAG_QUOTA_CONVERSATIONS_PER_USER of them)."""
    return _conversation_out(service.start(container.conversations, _caller(principal)))


@router.get("/conversations", response_model=ConversationList, responses=error_responses(422))
def list_conversations(
    container: ContainerDep,
    principal: Principal,
    limit: PageLimit = None,
    offset: PageOffset = 0,
) -> ConversationList:
    """The caller's conversations, most recently used first."""
    size = container.request_limits.page_size(limit)
    records, total = service.list_conversations(
        container.conversations, _caller(principal), size, offset
    )
    return ConversationList(data=[_conversation_out(r) for r in records], count=total)


@router.get(
    "/conversations/{conversation_id}",
    response_model=ConversationDetail,
    responses=error_responses(404, 422),
)
def get_conversation(
    conversation_id: str, container: ContainerDep, principal: Principal
) -> ConversationDetail:
    """The conversation with its kept messages; each answer with its own citations."""
    caller = _caller(principal)
    store = container.conversations
    record = service.get(store, caller, conversation_id)
    history = service.messages(store, caller, conversation_id)
    return ConversationDetail(
        **_conversation_out(record).model_dump(), history=[_message_out(m) for m in history]
    )


@router.delete(
    "/conversations/{conversation_id}", status_code=204, responses=error_responses(404, 422)
)
def delete_conversation(
    conversation_id: str, container: ContainerDep, principal: Principal
) -> Response:
    """Delete the conversation and every message of it."""
    service.delete(container.conversations, _caller(principal), conversation_id)
    return Response(status_code=204)


@router.post(
    "/conversations/{conversation_id}/messages",
    response_model=TurnOut,
    dependencies=[QueryRateLimit],
    responses={
        200: {
            "content": {"text/event-stream": {}},
            "description": "the answer; with ?stream=true, SSE events `standalone`, `token`, "
            "`citations`, `done` (with the turn's message ids) or `error`",
        },
        **error_responses(404, 409, 413, 422, 429, 503),
    },
)
async def post_message(
    conversation_id: str,
    body: MessageIn,
    container: ContainerDep,
    principal: Principal,
    stream: Annotated[bool, Query(description="answer as server-sent events")] = False,
) -> TurnOut | StreamingResponse:
    """Ask a question in the conversation: a follow-up is rewritten into a standalone question
    from the latest turns, answered like /query, and the turn is stored with its citations."""
    caller, deps = _caller(principal), container.conversation_deps
    if stream:
        events = await service.open_turn_stream(deps, caller, conversation_id, body.content, body.k)
        return EventStreamResponse(events, _wire_turn_event)
    return _turn_out(await service.ask(deps, caller, conversation_id, body.content, body.k))
