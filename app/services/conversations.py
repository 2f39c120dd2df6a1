"""Conversations: follow-ups rewritten into standalone questions, answered like /query, stored
per turn with their citations.

Answers come from the answer lane (`answer.answer` / `open_stream`) with the standalone
question, so admission, the answer cache and its key (tenant, standalone question, k, corpus
version, configuration) are exactly those of /query. The LLM rewrite runs under an answer slot
of its own, released before the answer asks for one.

Results are typed (`AnsweredTurn`, and the `TurnEvent`s of a stream); the routes turn them into
the JSON body and the server-sent events.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Literal

import anyio

from app.domain import ListedPage
from app.errors import NotFound, QuotaExceeded, public_message
from app.retrieval.scope import EVERYTHING, SearchScope
from app.services import answer as answer_service
from app.services.answer import (
    AnsweredQuestion,
    AnswerEvent,
    AnswerFailed,
    AnswerFinished,
    CitationsFound,
    Question,
    TextDelta,
)
from app.services.blocks.admission import Caller
from app.services.blocks.answer_lane import AnswerStream
from app.services.blocks.answer_log import AskedAs
from app.services.blocks.followups import Rewrite, Turn, question_shown, standalone_question
from app.storage.conversations import ConversationRecord, MessageRecord, NewTurn, StoredTurn

if TYPE_CHECKING:
    from app.config import Settings
    from app.services.answer import AnswerDeps
    from app.services.blocks.answer_lane import AnswerLane
    from app.storage.conversations import ConversationStore

NOT_FOUND = "conversation not found"
WITHHELD_ANSWER = "(withheld: this answer cites a document you can no longer read)"


@dataclass(frozen=True)
class RewriteConfig:
    """How follow-ups are rewritten (RAG_CONVERSATION_*): by the LLM or only by the fallback."""

    mode: Literal["llm", "fallback"]
    context_turns: int
    timeout_s: float
    refusal_text: str

    @classmethod
    def from_settings(cls, settings: Settings) -> RewriteConfig:
        """RAG_CONVERSATION_REWRITE, _CONTEXT_TURNS, _REWRITE_TIMEOUT_S and RAG_REFUSAL_TEXT."""
        return cls(
            mode=settings.conversation_rewrite,
            context_turns=settings.conversation_context_turns,
            timeout_s=settings.conversation_rewrite_timeout_s,
            refusal_text=settings.refusal_text,
        )


@dataclass(frozen=True)
class FollowUpDeps:
    """What answering a follow-up needs: the answer lane and service, and the rewrite config."""

    lane: AnswerLane
    answers: AnswerDeps
    rewrite: RewriteConfig


@dataclass(frozen=True)
class ConversationDeps:
    """What stored conversations need, built once per process by the container."""

    store: ConversationStore
    follow_ups: FollowUpDeps
    max_turns: int  # RAG_CONVERSATION_MAX_TURNS: the newest turns kept


@dataclass(frozen=True)
class TurnQuestion:
    """A question asked in a conversation: the text typed, the passages wanted (None: the
    default k), and what the asker may search and read now."""

    conversation_id: str
    content: str
    k: int | None
    scope: SearchScope = EVERYTHING
    readable: Callable[[str], bool] = lambda _document_id: True


@dataclass(frozen=True)
class AnsweredTurn:
    """A turn's answer (as /query gives it), the question it answered and where it was stored."""

    answered: AnsweredQuestion
    rewrite: Rewrite
    stored: StoredTurn


@dataclass(frozen=True)
class QuestionRewritten:
    """The first event of a streamed turn: the standalone question the answer is for."""

    rewrite: Rewrite


@dataclass(frozen=True)
class TurnFinished:
    """The last event of a streamed turn that was stored: the answer's end, and where it went."""

    finished: AnswerFinished
    stored: StoredTurn


TurnEvent = QuestionRewritten | TextDelta | CitationsFound | TurnFinished | AnswerFailed


def _missing() -> NotFound:
    return NotFound(NOT_FOUND)


def visible_history(
    history: Sequence[MessageRecord], readable: Callable[[str], bool]
) -> list[MessageRecord]:
    """The history as its caller may see it now: an answer citing a document the caller no
    longer reads keeps only its other citations, and its text (which quotes the document) is
    withheld; a question rewritten from answers citing such a document shows as it was typed.
    What is shown and what a follow-up's rewrite reads are both this."""
    shown = []
    for message in history:
        standalone = question_shown(
            message.standalone_question, message.content, message.rewrite_sources, readable
        )
        if standalone != message.standalone_question:
            message = replace(message, standalone_question=standalone)
        if message.citations is not None:
            kept = [c for c in message.citations if readable(str(c.get("document_id", "")))]
            if len(kept) < len(message.citations):
                message = replace(message, content=WITHHELD_ANSWER, citations=kept)
        shown.append(message)
    return shown


def turns_of(messages: Sequence[MessageRecord]) -> list[Turn]:
    """The stored messages as question/answer turns (an unanswered question has answer ''),
    each with the documents its answer cites."""
    turns: list[Turn] = []
    for message in messages:
        if message.role == "user":
            turns.append(Turn(message.content, "", ()))
        elif turns and not turns[-1].answer:
            cites = tuple(str(c.get("document_id", "")) for c in message.citations or [])
            turns[-1] = Turn(turns[-1].question, message.content, cites)
    return turns


async def rewrite_follow_up(
    deps: FollowUpDeps, caller: Caller, history: Sequence[Turn], follow_up: str
) -> Rewrite:
    """The standalone question for `follow_up` after `history` (see
    app/services/blocks/followups.py); the LLM runs on the answer lane under an answer slot
    (Overloaded: 429/503)."""
    config = deps.rewrite
    recent = list(history)[-config.context_turns :]
    rewrite = functools.partial(
        standalone_question,
        history=recent,
        follow_up=follow_up,
        refusal_text=config.refusal_text,
        max_chars=deps.answers.limits.max_question_chars,
        timeout_s=config.timeout_s,
    )
    if not recent or config.mode != "llm":
        return rewrite(None)
    slot = await deps.lane.answers.acquire(caller)
    try:
        result: Rewrite = await deps.lane.run(contextvars.copy_context(), rewrite, deps.answers.llm)
        return result
    finally:
        slot.release()


def start(store: ConversationStore, caller: Caller, title: str = "") -> ConversationRecord:
    """A new, empty conversation of the caller, titled (else its first question titles it;
    QuotaExceeded at their quota: 413)."""
    return store.create(caller.tenant_id, caller.user_id, title)


def get(store: ConversationStore, caller: Caller, *, conversation_id: str) -> ConversationRecord:
    """The caller's conversation (NotFound when missing or someone else's)."""
    record = store.get(caller.tenant_id, caller.user_id, conversation_id)
    if record is None:
        raise _missing()
    return record


def messages(
    store: ConversationStore, caller: Caller, *, conversation_id: str
) -> list[MessageRecord]:
    """The kept messages of the caller's conversation, oldest first (NotFound as `get`)."""
    found = store.messages(caller.tenant_id, caller.user_id, conversation_id)
    if found is None:
        raise _missing()
    return found


def list_conversations(
    store: ConversationStore, caller: Caller, limit: int, offset: int
) -> ListedPage[ConversationRecord]:
    """One page of the caller's conversations, most recently used first, and their total."""
    return store.list(caller.tenant_id, caller.user_id, limit, offset)


def delete(store: ConversationStore, caller: Caller, *, conversation_id: str) -> None:
    """Delete the caller's conversation and its messages (NotFound as `get`)."""
    if not store.delete(caller.tenant_id, caller.user_id, conversation_id):
        raise _missing()


def _check_room(
    store: ConversationStore, caller: Caller, conversation_id: str, question: str
) -> None:
    if not store.check_room(caller.tenant_id, caller.user_id, conversation_id, question):
        raise _missing()


@dataclass(frozen=True)
class _Prepared:
    question: str
    rewrite: Rewrite

    @property
    def asked_as(self) -> AskedAs | None:
        """How the answer's question was asked, when the rewrite changed it."""
        return asked_as(self.question, self.rewrite)


def asked_as(typed: str, rewrite: Rewrite) -> AskedAs | None:
    """The typed question and what its rewrite may quote, for the answer record; None when the
    question was not rewritten."""
    if rewrite.question == typed:
        return None
    return AskedAs(typed, rewrite.sources)


async def _prepare(deps: ConversationDeps, caller: Caller, asked: TurnQuestion) -> _Prepared:
    # /query's limits, checked before any work (the answer checks them again).
    limits = deps.follow_ups.answers.limits
    question = limits.question(asked.content)
    limits.k(asked.k)
    conversation_id = asked.conversation_id
    read = functools.partial(messages, deps.store, caller, conversation_id=conversation_id)
    stored = await anyio.to_thread.run_sync(read)
    # A turn that could not be stored is refused before any model work (QuotaExceeded: 413).
    await anyio.to_thread.run_sync(_check_room, deps.store, caller, conversation_id, question)
    # The rewrite reads the history as the caller may see it now: an answer quoting a document
    # they no longer read never reaches the new question.
    history = turns_of(visible_history(stored, asked.readable))
    rewrite = await rewrite_follow_up(deps.follow_ups, caller, history, question)
    return _Prepared(question, rewrite)


def _question(caller: Caller, asked: TurnQuestion, prepared: _Prepared) -> Question:
    """What the answer is asked: the standalone question, within the turn's scope."""
    rewritten = prepared.rewrite.question
    return Question(caller, rewritten, asked.k, asked.scope, prepared.asked_as)


def _store_turn(
    deps: ConversationDeps,
    caller: Caller,
    conversation_id: str,
    prepared: _Prepared,
    answer: str,
    citations: CitationsFound,
    answer_id: str,
) -> StoredTurn:
    turn = NewTurn(
        prepared.question,
        prepared.rewrite.question,
        answer,
        [asdict(citation) for citation in citations.citations],
        citations.refused,
        answer_id or None,
        None if prepared.rewrite.sources is None else list(prepared.rewrite.sources),
    )
    stored = deps.store.add_turn(
        caller.tenant_id, caller.user_id, conversation_id, turn, deps.max_turns
    )
    if stored is None:  # deleted while the answer was being made
        raise _missing()
    return stored


async def ask(deps: ConversationDeps, caller: Caller, asked: TurnQuestion) -> AnsweredTurn:
    """The cited answer of a new turn, the question it answered and where it was stored.

    QuotaExceeded (413, nothing stored) when the turn does not fit the conversation's or the
    tenant's quota: checked before answering, and with the answer's own size before storing.
    """
    prepared = await _prepare(deps, caller, asked)
    lane, answers = deps.follow_ups.lane, deps.follow_ups.answers
    answered = await answer_service.answer(lane, answers, _question(caller, asked, prepared))
    found = CitationsFound(answered.citations, answered.refused)
    stored = await anyio.to_thread.run_sync(
        _store_turn,
        deps,
        caller,
        asked.conversation_id,
        prepared,
        answered.answer,
        found,
        answered.answer_id,
    )
    return AnsweredTurn(answered, prepared.rewrite, stored)


@dataclass
class _Collected:
    text: list[str] = field(default_factory=list)
    citations: CitationsFound | None = None


class TurnStream:
    """The events of a streamed turn: `QuestionRewritten`, the answer's text deltas and
    citations, then `TurnFinished` once the turn is stored (or `AnswerFailed`).

    A stream that ends in an error or is left by its client stores nothing. It owns the
    answer's stream, and so its slots: closing it closes that.
    """

    def __init__(
        self,
        deps: ConversationDeps,
        caller: Caller,
        conversation_id: str,
        prepared: _Prepared,
        inner: AnswerStream[AnswerEvent],
    ) -> None:
        self._deps = deps
        self._caller = caller
        self._conversation_id = conversation_id
        self._prepared = prepared
        self._inner = inner
        self._pending: list[TurnEvent] = [QuestionRewritten(prepared.rewrite)]
        self._collected = _Collected()

    def __aiter__(self) -> TurnStream:
        return self

    async def __anext__(self) -> TurnEvent:
        if self._pending:
            return self._pending.pop(0)
        event: AnswerEvent = await self._inner.__anext__()
        if isinstance(event, TextDelta):
            self._collected.text.append(event.text)
        elif isinstance(event, CitationsFound):
            self._collected.citations = event
        elif isinstance(event, AnswerFinished):
            return await self._finish(event)
        return event

    async def _finish(self, finished: AnswerFinished) -> TurnEvent:
        collected = self._collected
        if collected.citations is None:  # an answer always sends its citations before its end
            raise RuntimeError("the answer finished without citations")
        refusal = self._deps.follow_ups.rewrite.refusal_text
        answer = refusal if collected.citations.refused else "".join(collected.text)
        try:
            stored: StoredTurn = await anyio.to_thread.run_sync(
                _store_turn,
                self._deps,
                self._caller,
                self._conversation_id,
                self._prepared,
                answer,
                collected.citations,
                finished.answer_id,
            )
        except (NotFound, QuotaExceeded) as exc:  # deleted meanwhile, or no room for this answer
            return AnswerFailed(exc.code, public_message(exc), exc.http_status)
        return TurnFinished(finished, stored)

    async def aclose(self) -> None:
        """Close the answer (and free its slots)."""
        await self._inner.aclose()


async def open_turn_stream(
    deps: ConversationDeps, caller: Caller, asked: TurnQuestion
) -> TurnStream:
    """The events of a new turn, admitted (Overloaded: 429/503 before any byte is sent)."""
    prepared = await _prepare(deps, caller, asked)
    lane, answers = deps.follow_ups.lane, deps.follow_ups.answers
    inner = await answer_service.open_stream(lane, answers, _question(caller, asked, prepared))
    return TurnStream(deps, caller, asked.conversation_id, prepared, inner)
