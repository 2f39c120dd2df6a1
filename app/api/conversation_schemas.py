"""Bodies of the conversation endpoints and of the OpenAI-compatible chat endpoint."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.api.collection_schemas import ScopeFields
from app.api.records import IsoTime, Record, fields_of
from app.api.schemas import CitationOut, QueryOut
from app.request_limits import (
    CHAT_MESSAGE_CHARS_CEILING,
    CHAT_MESSAGES_CEILING,
    K_CEILING,
    QUESTION_CHARS_CEILING,
)
from app.services.blocks.followups import Rewrite
from app.services.conversations import AnsweredTurn
from app.storage.conversations import one_line_title
from app.storage.tables import CONVERSATION_TITLE_CHARS

RewriteMethod = Literal["none", "llm", "fallback"]


class ConversationOut(Record):
    conversation_id: str
    title: str = Field(description="the first question, shortened; empty until one is asked")
    messages: int = Field(description="messages kept (two per turn)")
    created_at: IsoTime
    updated_at: IsoTime


class ConversationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(
        default=None,
        max_length=CONVERSATION_TITLE_CHARS,
        description="what listings show for it (on one line); without it, the first question",
    )

    @field_validator("title")
    @classmethod
    def _one_line(cls, title: str | None) -> str | None:
        if title is None:
            return None
        # Within the length already checked, so nothing is cut: only the white space folds.
        line = one_line_title(title)
        if not line:
            raise ValueError("a title needs a visible character (or leave it out)")
        return line


class MessageIn(ScopeFields):
    model_config = ConfigDict(extra="forbid")

    # The outer bounds; the configured caps are checked by RequestLimits (both in
    # app.request_limits).
    content: str = Field(min_length=1, max_length=QUESTION_CHARS_CEILING)
    k: int | None = Field(default=None, ge=1, le=K_CEILING)


class MessageOut(Record):
    message_id: str
    role: Literal["user", "assistant"]
    content: str
    standalone_question: str | None = Field(
        default=None,
        description="user messages: the question retrieval and the answer used; one rewritten "
        "from earlier answers shows as typed unless the caller reads every document they cite",
    )
    citations: list[CitationOut] | None = Field(
        default=None, description="assistant messages: what the [n] markers of this answer cite"
    )
    refused: bool | None = None
    created_at: IsoTime


class ConversationDetail(ConversationOut):
    history: list[MessageOut] = Field(description="the kept messages, oldest first")


class TurnOut(QueryOut):
    """The /query body of the turn's answer, plus where it was stored and what was asked."""

    conversation_id: str
    question_message_id: str
    answer_message_id: str
    standalone_question: str
    rewrite: RewriteMethod = Field(
        description="none (first question), llm, or fallback (previous question + follow-up)"
    )
    rewrite_ms: float = Field(description="time the LLM spent rewriting (0 when not asked)")

    @model_validator(mode="before")
    @classmethod
    def _turn(cls, turn: object) -> object:
        # A turn holds its answer, where it was stored and the question it answered.
        if isinstance(turn, AnsweredTurn):
            return {**fields_of(turn.answered, turn.stored), **rewrite_fields(turn.rewrite)}
        return turn


def rewrite_fields(rewrite: Rewrite) -> dict[str, Any]:
    """How a follow-up was rewritten, as a turn's body and its `standalone` event say it."""
    return {
        "standalone_question": rewrite.question,
        "rewrite": rewrite.method,
        "rewrite_ms": round(rewrite.llm_ms, 2),
    }


# --- OpenAI wire format (the fields its clients read; other request fields are ignored) ---


class ChatTextPart(BaseModel):
    type: Literal["text"]
    text: str = Field(max_length=CHAT_MESSAGE_CHARS_CEILING)


class ChatMessageIn(BaseModel):
    role: Literal["system", "developer", "user", "assistant"]
    # The question, the last user message, also has the configured /query cap. OpenAI's other
    # form, a list of parts, is read as its text parts one per line.
    content: (
        Annotated[str, Field(max_length=CHAT_MESSAGE_CHARS_CEILING)]
        | Annotated[list[ChatTextPart], Field(min_length=1, max_length=CHAT_MESSAGES_CEILING)]
    )

    @field_validator("content", mode="before")
    @classmethod
    def _text_parts_only(cls, content: Any) -> Any:
        if isinstance(content, list):
            kinds = {p.get("type") for p in content if isinstance(p, dict)} - {"text"}
            if kinds:
                named = ", ".join(sorted(str(k) for k in kinds))
                raise ValueError(f"only text parts are read; this service cannot read {named}")
        return content

    @field_validator("content")
    @classmethod
    def _text_within_cap(cls, content: str | list[ChatTextPart]) -> str | list[ChatTextPart]:
        if isinstance(content, list) and len(_joined(content)) > CHAT_MESSAGE_CHARS_CEILING:
            raise ValueError(
                f"the text parts have more than {CHAT_MESSAGE_CHARS_CEILING} characters"
            )
        return content

    @property
    def text(self) -> str:
        """The message's text: the string, or its text parts one per line."""
        return self.content if isinstance(self.content, str) else _joined(self.content)


def _joined(parts: list[ChatTextPart]) -> str:
    return "\n".join(part.text for part in parts)


class ChatCompletionIn(ScopeFields):
    """The OpenAI request body; `collections` and `filters` come as extra body fields (the
    OpenAI SDK's `extra_body`) and narrow what the answer may read, as on /query."""

    model_config = ConfigDict(extra="ignore")  # temperature, top_p, user...: not ours to honour

    model: str = Field(
        max_length=200,
        description="`rag`: every collection you read; `rag:<collection name>`: that one",
    )
    messages: list[ChatMessageIn] = Field(min_length=1, max_length=CHAT_MESSAGES_CEILING)
    stream: bool = False


class ChatMessageOut(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChatChoice(BaseModel):
    index: int = 0
    message: ChatMessageOut
    finish_reason: Literal["stop"] = "stop"


class ChatCompletionOut(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    citations: list[CitationOut] = Field(description="what the answer's [n] markers cite")
    refused: bool
    standalone_question: str


class ModelOut(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelOut]


def chunk(
    completion_id: str, created: int, model: str, delta: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    """One `chat.completion.chunk` object of a streamed completion."""
    finish = extra.pop("finish_reason", None)
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
