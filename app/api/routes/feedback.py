"""The answer record (GET/DELETE /answers) and feedback on answers (POST
/answers/{answer_id}/feedback, GET /feedback)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from app.api.access import Authorized
from app.api.deps import (
    AnswerRecords,
    Audit,
    ClientIp,
    Feedback,
    PageOffset,
    PageSize,
    ReadableDocuments,
)
from app.api.errors import error_responses
from app.api.openapi import content_response
from app.api.quality_schemas import (
    AnswerRecordOut,
    DeletedOut,
    FeedbackIn,
    FeedbackOut,
)
from app.api.records import Page, UtcMoment
from app.services import answer_history, feedback
from app.storage.feedback import FeedbackFilter

router = APIRouter(tags=["answer quality"], responses=error_responses(403, 422))

AnswerId = Annotated[str, "an answer id, a conversation message id or a chat completion id"]
JSONL = "application/x-ndjson"


def _jsonl(lines: object, name: str) -> StreamingResponse:
    return StreamingResponse(
        lines,  # type: ignore[arg-type]
        media_type=JSONL,
        headers={"Content-Disposition": f'attachment; filename="{name}.jsonl"'},
    )


@router.post(
    "/answers/{answer_id}/feedback", response_model=FeedbackOut, responses=error_responses(404)
)
def rate_answer(
    answer_id: AnswerId,
    body: FeedbackIn,
    deps: Feedback,
    caller: Authorized,
    ip: ClientIp,
    readable: ReadableDocuments,
) -> FeedbackOut:
    """Rate one of your answers up or down; rating again changes your rating. 404 for an
    answer that is not yours."""
    expected = [feedback.ExpectedPage(e.document_id, e.source, e.page) for e in body.expected]
    rated = feedback.rate(
        deps,
        caller.actor(ip),
        answer_id=answer_id,
        rating=body.rating,
        comment=body.comment,
        helpful_markers=body.helpful_markers,
        expected=expected,
        readable=readable,
    )
    return FeedbackOut.model_validate(rated)


@router.get(
    "/answers/{answer_id}/feedback", response_model=FeedbackOut, responses=error_responses(404)
)
def my_rating(
    answer_id: AnswerId, deps: Feedback, caller: Authorized, readable: ReadableDocuments
) -> FeedbackOut:
    """Your rating of one of your answers, with the documents you read now (404 when you have
    not rated it)."""
    found = feedback.mine(
        deps,
        tenant_id=caller.tenant_id,
        user_id=caller.user_id,
        answer_id=answer_id,
        readable=readable,
    )
    return FeedbackOut.model_validate(found)


@router.get(
    "/feedback",
    response_model=Page[FeedbackOut],
    responses=content_response("a page, or with format=jsonl every match", JSONL),
)
def list_feedback(
    deps: Feedback,
    caller: Authorized,
    readable: ReadableDocuments,
    size: PageSize,
    offset: PageOffset = 0,
    rating: Literal["up", "down"] | None = None,
    user_id: Annotated[str | None, Query(max_length=40)] = None,
    since: UtcMoment | None = None,
    until: UtcMoment | None = None,
    with_expected: Annotated[
        bool | None, Query(description="only ratings that name (or do not name) expected pages")
    ] = None,
    format: Annotated[
        Literal["json", "jsonl"], Query(description="`jsonl`: every match, one per line")
    ] = "json",
) -> Page[FeedbackOut] | StreamingResponse:
    """Your tenant's ratings of answers, newest first (admins), with the question while the
    answer record keeps it and the documents you read; `format=jsonl` exports every match."""
    which = FeedbackFilter(rating, user_id, since, until, with_expected)
    if format == "jsonl":
        return _jsonl(
            feedback.export_lines(deps, tenant_id=caller.tenant_id, which=which, readable=readable),
            "feedback",
        )
    found = feedback.listing(
        deps, tenant_id=caller.tenant_id, which=which, limit=size, offset=offset, readable=readable
    )
    return Page[FeedbackOut].of(found.records, found.total)


@router.get("/answers", response_model=Page[AnswerRecordOut])
def list_answers(
    records: AnswerRecords,
    caller: Authorized,
    readable: ReadableDocuments,
    size: PageSize,
    offset: PageOffset = 0,
    all: Annotated[bool, Query(description="admins: every user's answers")] = False,
    user_id: Annotated[str | None, Query(max_length=40, description="admins: one user's")] = None,
) -> Page[AnswerRecordOut]:
    """Your answers from the answer record, newest first (admins: `all=true` for the tenant's)."""
    found = answer_history.page(
        records,
        caller,
        size,
        offset,
        readable,
        everyone=all or user_id is not None,
        user_id=user_id,
    )
    return Page[AnswerRecordOut].of(found.records, found.total)


@router.get("/answers/export", response_class=StreamingResponse)
def export_answers(
    records: AnswerRecords,
    audit: Audit,
    caller: Authorized,
    ip: ClientIp,
    readable: ReadableDocuments,
) -> StreamingResponse:
    """Every answer record of your tenant as JSON lines, oldest first (admins)."""
    lines = answer_history.export_lines(records, audit, caller.actor(ip), readable)
    return _jsonl(lines, "answers")


@router.delete("/answers", response_model=DeletedOut)
def delete_answers(
    records: AnswerRecords,
    audit: Audit,
    caller: Authorized,
    ip: ClientIp,
    before: Annotated[UtcMoment | None, Query(description="only records older than this")] = None,
) -> DeletedOut:
    """Delete your tenant's answer record (all of it, or what is older than `before`)."""
    deleted = answer_history.delete(records, audit, caller.actor(ip), before)
    return DeletedOut(deleted=deleted)


@router.get("/answers/{answer_id}", response_model=AnswerRecordOut, responses=error_responses(404))
def get_answer(
    answer_id: AnswerId, records: AnswerRecords, caller: Authorized, readable: ReadableDocuments
) -> AnswerRecordOut:
    """One answer's record: yours, or any of your tenant's for an admin (with the cited and
    retrieved documents you read now)."""
    found = answer_history.get(records, caller, answer_id=answer_id, readable=readable)
    return AnswerRecordOut.model_validate(found)
