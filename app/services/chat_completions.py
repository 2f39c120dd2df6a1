"""OpenAI-style chat completions answered by the service: the last user message is the
question, the earlier messages are the history its follow-up is rewritten from.

Nothing is stored: a chat client sends the whole history with every request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from app.errors import InvalidInput
from app.retrieval.scope import EVERYTHING, SearchScope
from app.services import answer as answer_service
from app.services.answer import AnsweredQuestion, AnswerEvent
from app.services.blocks.admission import Caller
from app.services.blocks.answer_lane import AnswerStream
from app.services.blocks.followups import Rewrite, Turn
from app.services.conversations import FollowUpDeps, asked_as, rewrite_follow_up

# The one model this endpoint offers: cited answers from the caller's own documents.
SERVICE_MODEL = "rag"
Answer = TypeVar("Answer")


@dataclass(frozen=True)
class Said:
    """One message of a chat request."""

    role: str
    content: str


@dataclass(frozen=True)
class ChatQuestion:
    """A chat request read as a conversation: the turns before, and the question asked now."""

    history: list[Turn]
    question: str


@dataclass(frozen=True)
class Completion(Generic[Answer]):
    """A completion's answer (whole, or its admitted stream of events), and how its standalone
    question was made."""

    answer: Answer
    rewrite: Rewrite


def split_chat(messages: Sequence[Said]) -> ChatQuestion:
    """The history turns and the question: the last message must be the user's; system
    messages are ignored (the service's own instructions apply)."""
    spoken = [m for m in messages if m.role in ("user", "assistant")]
    if not spoken or spoken[-1].role != "user":
        raise InvalidInput("the last message must be the user's question")
    turns: list[Turn] = []
    for message in spoken[:-1]:
        if message.role == "user":
            turns.append(Turn(message.content, ""))
        elif turns and not turns[-1].answer:
            turns[-1] = Turn(turns[-1].question, message.content)
    return ChatQuestion(turns, spoken[-1].content)


def check_model(model: str) -> str | None:
    """The collection a model names (`rag:<collection>`; None for `rag`, everything the caller
    reads); InvalidInput (a 4xx the openai client raises clearly) for a model this service
    lacks."""
    if model == SERVICE_MODEL:
        return None
    prefix = SERVICE_MODEL + ":"
    if model.startswith(prefix) and model[len(prefix) :].strip():
        return model[len(prefix) :]
    raise InvalidInput(
        f"unknown model {model!r}; this service offers {SERVICE_MODEL!r} and "
        f"'{SERVICE_MODEL}:<collection>'"
    )


def model_ids(collection_names: Sequence[str]) -> list[str]:
    """The models a caller may use: everything it reads, and each collection it reads."""
    return [SERVICE_MODEL, *(f"{SERVICE_MODEL}:{name}" for name in sorted(collection_names))]


async def _standalone(
    deps: FollowUpDeps, caller: Caller, messages: Sequence[Said], scope: SearchScope
) -> tuple[Rewrite, answer_service.Question]:
    """How the standalone question was made, and the question the answer is asked: that
    question within `scope`."""
    chat = split_chat(messages)
    typed = deps.answers.limits.question(chat.question)  # /query's limit, before any work
    rewrite = await rewrite_follow_up(deps, caller, chat.history, typed)
    # The history is the client's: what its answers cite is not known, so the answer record
    # shows a rewritten question as typed.
    asked = asked_as(typed, rewrite)
    return rewrite, answer_service.Question(caller, rewrite.question, None, scope, asked)


async def complete(
    deps: FollowUpDeps,
    caller: Caller,
    messages: Sequence[Said],
    scope: SearchScope = EVERYTHING,
) -> Completion[AnsweredQuestion]:
    """The answer to the standalone question within `scope`, and how that question was made."""
    rewrite, question = await _standalone(deps, caller, messages, scope)
    return Completion(await answer_service.answer(deps.lane, deps.answers, question), rewrite)


async def open_completion(
    deps: FollowUpDeps,
    caller: Caller,
    messages: Sequence[Said],
    scope: SearchScope = EVERYTHING,
) -> Completion[AnswerStream[AnswerEvent]]:
    """The admitted answer stream of the standalone question within `scope`, and how that
    question was made."""
    rewrite, question = await _standalone(deps, caller, messages, scope)
    return Completion(await answer_service.open_stream(deps.lane, deps.answers, question), rewrite)
