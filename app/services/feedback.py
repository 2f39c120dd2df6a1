"""People judge answers: one rating per person per answer, which they may change.

An answer can be rated only by the person it was given to, in their tenant: anything else is
the same 404 as an answer that does not exist. The audit log records the rating, never the
comment text. `expected` pages must be documents of the tenant the person reads (checked
here, resolved to ids).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from app import metrics
from app.domain import ListedPage
from app.errors import InvalidInput, NotFound, or_not_found
from app.services.answer_history import documents_read, question_read
from app.services.blocks.answer_log import answer_id_of
from app.services.documents import document_named
from app.storage.feedback import FeedbackFilter, FeedbackRecord, FeedbackStore, NewFeedback

if TYPE_CHECKING:
    from app.services.audit import Actor, AuditLog
    from app.storage.answer_records import AnswerRecordStore
    from app.storage.documents import DocumentStore

Rating = Literal["up", "down"]
MAX_EXPECTED = 20
MAX_MARKERS = 50


@dataclass(frozen=True)
class FeedbackDeps:
    """The stores rating answers reads and writes."""

    records: AnswerRecordStore
    feedback: FeedbackStore
    audit: AuditLog
    documents: DocumentStore


@dataclass(frozen=True)
class Rated:
    """A rating as stored, and whether it changed the caller's earlier one."""

    feedback: FeedbackRecord
    changed: bool


@dataclass(frozen=True)
class ExpectedPage:
    """A page the person says the answer should have used (a document id or a file name)."""

    document_id: str | None = None
    source: str | None = None
    page: int | None = None


def _missing() -> NotFound:
    return NotFound("no such answer")


def _resolved(
    deps: FeedbackDeps,
    tenant_id: str,
    expected: list[ExpectedPage],
    readable: Callable[[str], bool],
) -> list[dict[str, Any]]:
    """Each expected page as {document_id, source, page}: a document of the tenant the caller
    reads now, or 422 (the same for one they may not read as for a missing one)."""
    resolved = []
    for wanted in expected:
        record = document_named(
            deps.documents,
            tenant_id=tenant_id,
            document_id=wanted.document_id,
            source=wanted.source,
            readable=readable,
        )
        if record is None:
            named = wanted.document_id or wanted.source or "(none)"
            raise InvalidInput(f"expected document {named!r} is not one of your documents")
        if wanted.page is not None and record.pages and not 1 <= wanted.page <= record.pages:
            raise InvalidInput(
                f"expected page {wanted.page} is not in {record.source!r} (1-{record.pages})"
            )
        resolved.append(
            {"document_id": record.document_id, "source": record.source, "page": wanted.page}
        )
    return resolved


def rate(
    deps: FeedbackDeps,
    actor: Actor,
    *,
    answer_id: str,
    rating: Rating,
    comment: str | None = None,
    helpful_markers: list[int] | None = None,
    expected: list[ExpectedPage] | None = None,
    readable: Callable[[str], bool] = lambda _document_id: True,
) -> Rated:
    """Store or change the caller's rating of their answer; the record (with the documents
    `readable` says the caller reads now) and whether it changed an earlier one. NotFound for
    an answer that is not the caller's; `expected` names only documents the caller reads."""
    if actor.user_id is None:
        raise _missing()
    answer_id = answer_id_of(answer_id)
    answer = deps.records.get(actor.tenant_id, answer_id, user_id=actor.user_id)
    if answer is None:
        raise _missing()
    markers = sorted(set(helpful_markers or []))
    cited = {int(c["marker"]) for c in answer.cited}
    if answer.question is not None and any(m not in cited for m in markers):
        raise InvalidInput(f"helpful_markers must be markers the answer cited: {sorted(cited)}")
    pages = _resolved(deps, actor.tenant_id, expected or [], readable)
    given = NewFeedback(rating, comment or None, markers, pages)
    stored, previous = deps.feedback.rate(actor.tenant_id, answer_id, actor.user_id, given)
    deps.audit.record(
        actor.entry(
            "answer.rated",
            target_id=answer_id,
            rating=rating,
            previous=previous,
            comment=comment is not None and comment != "",
            helpful_markers=len(markers),
            expected=len(pages),
        )
    )
    metrics.feedback(rating)
    return Rated(_shown(stored, readable), previous is not None)


def mine(
    deps: FeedbackDeps,
    *,
    tenant_id: str,
    user_id: str,
    answer_id: str,
    readable: Callable[[str], bool],
) -> FeedbackRecord:
    """The caller's rating of their answer, with the documents they read now (NotFound when
    none)."""
    found = deps.feedback.mine(tenant_id, answer_id_of(answer_id), user_id)
    return _shown(or_not_found(found, "no rating of this answer"), readable)


def _shown(record: FeedbackRecord, readable: Callable[[str], bool]) -> FeedbackRecord:
    """The rating with only the cited and expected documents `readable` says the reader reads,
    and its answer's question, as the answer record shows them."""
    return dataclasses.replace(
        record,
        question=question_read(record, readable),
        cited=documents_read(record.cited, readable),
        expected=documents_read(record.expected, readable),
    )


def listing(
    deps: FeedbackDeps,
    *,
    tenant_id: str,
    which: FeedbackFilter,
    limit: int,
    offset: int,
    readable: Callable[[str], bool],
) -> ListedPage[FeedbackRecord]:
    """A page of the tenant's feedback, newest first, showing the documents the caller reads,
    and the count of all that match."""
    found = deps.feedback.page(tenant_id, which, limit, offset)
    return ListedPage([_shown(r, readable) for r in found.records], found.total)


def export_lines(
    deps: FeedbackDeps, *, tenant_id: str, which: FeedbackFilter, readable: Callable[[str], bool]
) -> Iterator[bytes]:
    """The tenant's matching feedback as JSON lines, oldest first, showing the documents the
    caller reads."""
    for record in deps.feedback.export(tenant_id, which):
        yield (json.dumps(_shown(record, readable).public(), ensure_ascii=False) + "\n").encode()
