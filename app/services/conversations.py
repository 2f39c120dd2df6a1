"""Conversations: follow-ups rewritten into standalone questions, answered like /query, stored
per turn with their citations.

Answers come from the answer lane (`answer_lane.answer` / `open_stream`) with the standalone
question, so admission, the answer cache and its key (tenant, standalone question, k, corpus
version, configuration) are exactly those of /query. The LLM rewrite runs under an answer slot
of its own, released before the answer asks for one.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from app.errors import NotFound
from app.observability import error_payload
from app.services import answer_lane
from app.services.admission import Caller
from app.services.answer_lane import AnswerStream, StreamEvent
from app.services.container import Container
from app.services.followups import Rewrite, Turn, standalone_question
from app.services.search import check_question
from app.storage.conversations import ConversationRecord, MessageRecord, NewTurn

NOT_FOUND = "conversation not found"


def _missing() -> NotFound:
    return NotFound(NOT_FOUND)


def turns_of(messages: Sequence[MessageRecord]) -> list[Turn]:
    """The stored messages as question/answer turns (an unanswered question has answer '')."""
    turns: list[Turn] = []
    for message in messages:
        if message.role == "user":
            turns.append(Turn(message.content, ""))
        elif turns and not turns[-1].answer:
            turns[-1] = Turn(turns[-1].question, message.content)
    return turns


async def rewrite_follow_up(
    container: Container, caller: Caller, history: Sequence[Turn], follow_up: str
) -> Rewrite:
    """The standalone question for `follow_up` after `history` (see app/services/followups.py);
    the LLM runs on the answer lane under an answer slot (Overloaded: 429/503)."""
    settings = container.settings
    recent = list(history)[-settings.conversation_context_turns :]
    rewrite = functools.partial(
        standalone_question,
        history=recent,
        follow_up=follow_up,
        refusal_text=settings.refusal_text,
        max_chars=settings.max_question_chars,
        timeout_s=settings.conversation_rewrite_timeout_s,
    )
    if not recent or settings.conversation_rewrite != "llm":
        return rewrite(None)
    lane = container.answer_lane
    slot = await lane.answers.acquire(caller)
    try:
        result: Rewrite = await lane.run(contextvars.copy_context(), rewrite, container.llm)
        return result
    finally:
        slot.release()


def start(container: Container, caller: Caller) -> ConversationRecord:
    """A new, empty conversation of the caller."""
    return container.conversations.create(caller.tenant_id, caller.user_id)


def get(container: Container, caller: Caller, conversation_id: str) -> ConversationRecord:
    """The caller's conversation (NotFound when missing or someone else's)."""
    record = container.conversations.get(caller.tenant_id, caller.user_id, conversation_id)
    if record is None:
        raise _missing()
    return record


def messages(container: Container, caller: Caller, conversation_id: str) -> list[MessageRecord]:
    """The kept messages of the caller's conversation, oldest first (NotFound as `get`)."""
    found = container.conversations.messages(caller.tenant_id, caller.user_id, conversation_id)
    if found is None:
        raise _missing()
    return found


def list_conversations(
    container: Container, caller: Caller, limit: int, offset: int
) -> tuple[list[ConversationRecord], int]:
    """One page of the caller's conversations, most recently used first, and their total."""
    return container.conversations.list(caller.tenant_id, caller.user_id, limit, offset)


def delete(container: Container, caller: Caller, conversation_id: str) -> None:
    """Delete the caller's conversation and its messages (NotFound as `get`)."""
    if not container.conversations.delete(caller.tenant_id, caller.user_id, conversation_id):
        raise _missing()


@dataclass
class _Prepared:
    question: str
    rewrite: Rewrite


async def _prepare(
    container: Container, caller: Caller, conversation_id: str, content: str
) -> _Prepared:
    question = check_question(container, content)  # the /query limit, before any work
    stored = await anyio.to_thread.run_sync(messages, container, caller, conversation_id)
    rewrite = await rewrite_follow_up(container, caller, turns_of(stored), question)
    return _Prepared(question, rewrite)


def _store_turn(
    container: Container,
    caller: Caller,
    conversation_id: str,
    prepared: _Prepared,
    answer: str,
    citations: list[dict[str, Any]],
    refused: bool,
) -> dict[str, Any]:
    turn = NewTurn(prepared.question, prepared.rewrite.question, answer, citations, refused)
    ids = container.conversations.add_turn(
        caller.tenant_id,
        caller.user_id,
        conversation_id,
        turn,
        container.settings.conversation_max_turns,
    )
    if ids is None:  # deleted while the answer was being made
        raise _missing()
    return {
        "conversation_id": conversation_id,
        "question_message_id": ids[0],
        "answer_message_id": ids[1],
    }


def _rewrite_fields(rewrite: Rewrite) -> dict[str, Any]:
    return {
        "standalone_question": rewrite.question,
        "rewrite": rewrite.method,
        "rewrite_ms": round(rewrite.llm_ms, 2),
    }


async def ask(
    container: Container, caller: Caller, conversation_id: str, content: str, k: int | None
) -> dict[str, Any]:
    """The cited answer of a new turn (the /query body plus the turn's ids and rewrite)."""
    prepared = await _prepare(container, caller, conversation_id, content)
    body = await answer_lane.answer(container, caller, prepared.rewrite.question, k)
    ids = await anyio.to_thread.run_sync(
        _store_turn,
        container,
        caller,
        conversation_id,
        prepared,
        body["answer"],
        body["citations"],
        body["refused"],
    )
    return {**body, **ids, **_rewrite_fields(prepared.rewrite)}


@dataclass
class _Collected:
    text: list[str] = field(default_factory=list)
    citations: list[dict[str, Any]] = field(default_factory=list)
    refused: bool = False


class TurnStream(AnswerStream):
    """An answer stream that first says which question it answers (`standalone` event) and,
    when the answer is complete, stores the turn and names its ids in the `done` event.

    A stream that ends in an error or is left by its client stores nothing.
    """

    def __init__(
        self,
        inner: AnswerStream,
        first: StreamEvent,
        store: Callable[[_Collected], Awaitable[dict[str, Any]]],
    ) -> None:  # everything is delegated to `inner`, which owns the slots
        self._inner = inner
        self._pending: list[StreamEvent] = [first]
        self._store = store
        self._collected = _Collected()

    def __aiter__(self) -> TurnStream:
        return self

    async def __anext__(self) -> StreamEvent:
        if self._pending:
            return self._pending.pop(0)
        event, data = await self._inner.__anext__()
        if event == "token":
            self._collected.text.append(data["text"])
        elif event == "citations":
            self._collected.citations = data["citations"]
            self._collected.refused = data["refused"]
        elif event == "done":
            try:
                ids = await self._store(self._collected)
            except NotFound as exc:
                return "error", error_payload(exc.code, exc.message, exc.http_status)
            data = {**data, **ids}
        return event, data

    async def aclose(self) -> None:
        """Close the answer (and free its slots)."""
        await self._inner.aclose()


async def open_turn_stream(
    container: Container, caller: Caller, conversation_id: str, content: str, k: int | None
) -> TurnStream:
    """The events of a new turn: `standalone`, then /query/stream's `token`, `citations` and
    `done` (with the turn's ids), or `error`."""
    prepared = await _prepare(container, caller, conversation_id, content)
    inner = await answer_lane.open_stream(container, caller, prepared.rewrite.question, k)

    async def store(collected: _Collected) -> dict[str, Any]:
        stored: dict[str, Any] = await anyio.to_thread.run_sync(
            _store_turn,
            container,
            caller,
            conversation_id,
            prepared,
            container.settings.refusal_text if collected.refused else "".join(collected.text),
            collected.citations,
            collected.refused,
        )
        return stored

    return TurnStream(inner, ("standalone", _rewrite_fields(prepared.rewrite)), store)
