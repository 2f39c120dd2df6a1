"""`/v1/chat/completions` and `/v1/models` in OpenAI's wire format, so chat front-ends and
OpenAI SDKs can ask the service; answers carry [n] markers and a `citations` field.

Errors keep the service's envelope, `{"error": {"code", "message"}}`, which OpenAI clients read
as an API error (non-streamed: by status; streamed: a `data:` line holding `error`).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from app.api.conversation_schemas import (
    ChatChoice,
    ChatCompletionIn,
    ChatCompletionOut,
    ChatMessageOut,
    ModelList,
    ModelOut,
    chunk,
)
from app.api.deps import (
    CallerAccess,
    FollowUps,
    Principal,
    QueryRateLimit,
    ScopeOf,
)
from app.api.errors import error_responses
from app.api.openapi import content_response
from app.api.schemas import CitationOut
from app.api.streams import EVENT_STREAM, AnswerStreamResponse
from app.errors import NotFound
from app.observability import error_payload
from app.services import chat_completions as service
from app.services.answer import (
    AnswerEvent,
    AnswerFailed,
    AnswerFinished,
    CitationsFound,
    TextDelta,
)
from app.services.blocks.answer_lane import AnswerStream
from app.services.blocks.answer_log import completion_id_of
from app.services.collection_access import CollectionAccess

router = APIRouter(prefix="/v1", tags=["openai-compatible"])
# The service's models exist as long as it runs; OpenAI's field wants a Unix time.
_MODELS_CREATED = 0


@router.get("/models", response_model=ModelList)
def list_models(access: CallerAccess) -> ModelList:
    """What `model` of /v1/chat/completions accepts: `rag` (every collection you read) and
    `rag:<collection>` for each collection you read."""
    return ModelList(data=[_model(model) for model in _models_of(access)])


@router.get("/models/{model_id}", response_model=ModelOut, responses=error_responses(404, 422))
def get_model(model_id: str, access: CallerAccess) -> ModelOut:
    """One model of /v1/models (what an SDK's models.retrieve asks); a collection you do not
    read is a 404 like a missing one."""
    if model_id not in _models_of(access):
        raise NotFound(f"model not found: {model_id}")
    return _model(model_id)


def _models_of(access: CollectionAccess) -> list[str]:
    return service.model_ids([access.all_collections[c] for c in access.readable])


def _model(model_id: str) -> ModelOut:
    return ModelOut(id=model_id, created=_MODELS_CREATED, owned_by="rag-service")


def _data(payload: dict[str, Any] | str) -> bytes:
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


async def _chunks(
    events: AnswerStream[AnswerEvent],
    completion_id: str,
    created: int,
    model: str,  # the one asked for, as the plain completion says it
    standalone: str,
) -> AsyncIterator[bytes]:
    yield _data(chunk(completion_id, created, model, {"role": "assistant", "content": ""}))
    found = CitationsFound([], False)
    async for event in events:
        if isinstance(event, TextDelta):
            yield _data(chunk(completion_id, created, model, {"content": event.text}))
        elif isinstance(event, CitationsFound):
            found = event
        elif isinstance(event, AnswerFinished):
            yield _data(
                chunk(
                    completion_id,
                    created,
                    model,
                    {},
                    finish_reason="stop",
                    citations=[asdict(c) for c in found.citations],
                    refused=found.refused,
                    standalone_question=standalone,
                )
            )
            yield _data("[DONE]")
        elif isinstance(event, AnswerFailed):
            # What OpenAI clients raise as an APIError.
            yield _data({"error": error_payload(event.code, event.message, event.http_status)})
            return


@router.post(
    "/chat/completions",
    response_model=ChatCompletionOut,
    dependencies=[QueryRateLimit],
    responses={
        **content_response(
            "with `stream: true`, chat.completion.chunk lines, then [DONE]", EVENT_STREAM
        ),
        **error_responses(404, 409, 413, 422, 429, 503),  # 404: a collection you do not read
    },
)
async def chat_completions(
    body: ChatCompletionIn, principal: Principal, deps: FollowUps, scope_of: ScopeOf
) -> ChatCompletionOut | StreamingResponse:
    """A cited answer to the last user message; earlier messages are the history."""
    named = service.check_model(body.model)
    collections = body.collections
    if named is not None:  # the model's collection, narrowed further by the body's, if any
        collections = [named] if collections is None or named in collections else []
    scope = await run_in_threadpool(scope_of, collections, body.filters)
    caller = principal.as_caller()
    said = [service.Said(m.role, m.text) for m in body.messages]
    created = int(time.time())
    if body.stream:
        streamed = await service.open_completion(deps, caller, said, scope)
        events = streamed.answer
        completion_id = completion_id_of(events.answer_id)
        return AnswerStreamResponse(
            events, _chunks(events, completion_id, created, body.model, streamed.rewrite.question)
        )
    completed = await service.complete(deps, caller, said, scope)
    answered = completed.answer
    return ChatCompletionOut(
        id=completion_id_of(answered.answer_id),
        created=created,
        model=body.model,
        choices=[ChatChoice(message=ChatMessageOut(content=answered.answer))],
        citations=[CitationOut(**asdict(c)) for c in answered.citations],
        refused=answered.refused,
        standalone_question=completed.rewrite.question,
    )
