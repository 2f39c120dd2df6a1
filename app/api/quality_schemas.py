"""Bodies of the answer record, feedback and evaluation endpoints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.api.records import FlatRecord, IsoTime, Record
from app.request_limits import QUESTION_CHARS_CEILING
from app.services.evaluation_sets import MAX_EXPECTED_PER_ITEM, MAX_ITEMS, NAME_CHARS
from app.services.feedback import MAX_EXPECTED, MAX_MARKERS

COMMENT_CHARS = 2000
SOURCE_CHARS = 255
QUESTION_FIELD_CHARS = QUESTION_CHARS_CEILING


class ExpectedPageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    document_id: str | None = Field(default=None, max_length=64)
    source: str | None = Field(default=None, max_length=SOURCE_CHARS, description="file name")
    page: int | None = Field(default=None, ge=1, le=1_000_000)

    @model_validator(mode="after")
    def _names_a_document(self) -> ExpectedPageIn:
        if not self.document_id and not self.source:
            raise ValueError("give document_id or source")
        return self


class FeedbackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rating: Literal["up", "down"]
    comment: str | None = Field(
        default=None, max_length=COMMENT_CHARS, description="kept for admins, never audited"
    )
    helpful_markers: list[int] = Field(
        default_factory=list,
        max_length=MAX_MARKERS,
        description="the citation markers ([n]) that helped",
    )
    expected: list[ExpectedPageIn] = Field(
        default_factory=list,
        max_length=MAX_EXPECTED,
        description="the documents / pages the answer should have used",
    )


class FeedbackOut(FlatRecord):
    """Read from a rating as stored, or from one just given (with whether it `changed`)."""

    holds = "feedback"

    answer_id: str
    user_id: str
    rating: Literal["up", "down"]
    comment: str | None
    helpful_markers: list[int]
    expected: list[dict[str, Any]]
    question: str | None = Field(
        description="the answer's question while the record keeps it (as the answer record "
        "shows it to the caller)"
    )
    cited: list[dict[str, Any]] = Field(description="what the answer cited (record kept)")
    created_at: IsoTime
    updated_at: IsoTime
    changed: bool = Field(default=False, description="this changed an earlier rating")


class AnswerRecordOut(Record):
    answer_id: str
    user_id: str
    created_at: IsoTime
    question: str | None = Field(
        description="null when RAG_ANSWER_LOG_DAYS is 0; a conversation's rewritten question "
        "only when the caller reads every document the earlier answers it was rewritten from "
        "cite, else the question as typed"
    )
    refused: bool | None
    cache: str | None
    model: str | None
    cited: list[dict[str, Any]]
    retrieved: list[dict[str, Any]]
    timings: dict[str, float]
    total_ms: float | None


class DeletedOut(BaseModel):
    deleted: int


class EvaluationItemIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=QUESTION_FIELD_CHARS)
    expected: list[ExpectedPageIn] = Field(default_factory=list, max_length=MAX_EXPECTED_PER_ITEM)
    answerable: bool = True


class EvaluationSetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=NAME_CHARS)
    items: list[EvaluationItemIn] = Field(min_length=1, max_length=MAX_ITEMS)


class EvaluationSetFromFeedbackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=NAME_CHARS)


class EvaluationSetOut(Record):
    set_id: str
    name: str
    item_count: int
    created_at: IsoTime
    created_by: str | None
    items: list[dict[str, Any]] = Field(default_factory=list, description="only for one set")


class EvaluationRunIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    set_id: str = Field(min_length=1, max_length=32)
    answers: bool = Field(
        default=False, description="also answer each question (slower: the model runs)"
    )


class EvaluationRunOut(Record):
    run_id: str
    set_id: str
    status: Literal["queued", "processing", "done", "failed"]
    answers: bool
    progress: dict[str, int]
    created_at: IsoTime
    updated_at: IsoTime
    summary: dict[str, Any] = Field(description="the aggregate once done")
    error: str | None
    documents: int = Field(description="documents of the tenant when the run started")
    results: list[dict[str, Any]] = Field(
        default_factory=list, description="per item, only for one run"
    )

    @field_validator("documents", mode="before")
    @classmethod
    def _counted(cls, documents: object) -> object:
        # A run records each document it saw; the body says how many.
        return len(documents) if isinstance(documents, Mapping) else documents
