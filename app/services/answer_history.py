"""Reading, exporting and deleting the answer record: a person sees their own answers, a
tenant admin every answer of the tenant; nobody another tenant's. A record shows the cited and
retrieved documents the reader reads now (a document moved out of their reach drops out), and a
question rewritten from earlier answers only to who reads what those cite (else as typed)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.domain import ListedPage, role_at_least
from app.errors import or_not_found
from app.services.blocks.answer_log import answer_id_of
from app.services.blocks.followups import question_shown
from app.storage.answer_records import AnswerRecord, AnswerRecordStore
from app.storage.feedback import FeedbackRecord

if TYPE_CHECKING:
    from app.services.audit import Actor, AuditLog
    from app.services.auth import Identity


ReadsDocument = Callable[[str], bool]


def shown(record: AnswerRecord, readable: ReadsDocument) -> AnswerRecord:
    """The record with only the cited and retrieved documents `readable` says the reader reads,
    and its question as `question_shown` lets them see it. The retrieved passages are ranked
    again among those shown, so a gap in the ranks does not tell where a hidden one stood."""
    retrieved = documents_read(record.retrieved, readable)
    return dataclasses.replace(
        record,
        question=question_read(record, readable),
        cited=documents_read(record.cited, readable),
        retrieved=[{**hit, "rank": rank} for rank, hit in enumerate(retrieved, start=1)],
    )


def question_read(record: AnswerRecord | FeedbackRecord, readable: ReadsDocument) -> str | None:
    """A record's question as `question_shown` lets the reader see it."""
    return question_shown(record.question, record.typed_question, record.rewrite_sources, readable)


def documents_read(
    documents: list[dict[str, Any]], readable: ReadsDocument
) -> list[dict[str, Any]]:
    """The documents of a record (cited, retrieved, expected) that `readable` says the reader
    reads."""
    return [d for d in documents if readable(str(d.get("document_id")))]


def _visible_user(caller: Identity, everyone: bool) -> str | None:
    """Whose records the caller reads: only their own unless an admin asks for everyone's."""
    return None if everyone and role_at_least(caller.role, "admin") else caller.user_id


def page(
    store: AnswerRecordStore,
    caller: Identity,
    limit: int,
    offset: int,
    readable: ReadsDocument,
    everyone: bool = False,
    *,
    user_id: str | None = None,
) -> ListedPage[AnswerRecord]:
    """The caller's answers (an admin's `everyone`: the tenant's, or one user's), newest first,
    showing the documents the caller reads."""
    visible = _visible_user(caller, everyone)
    if visible is None and user_id is not None:
        visible = user_id
    found = store.page(caller.tenant_id, limit, offset, user_id=visible)
    return ListedPage([shown(r, readable) for r in found.records], found.total)


def get(
    store: AnswerRecordStore, caller: Identity, *, answer_id: str, readable: ReadsDocument
) -> AnswerRecord:
    """One answer's record: the caller's own, or any of the tenant's for an admin; else 404.
    It shows the documents the caller reads."""
    visible = _visible_user(caller, everyone=True)
    found = store.get(caller.tenant_id, answer_id_of(answer_id), user_id=visible)
    return shown(or_not_found(found, "no such answer"), readable)


def export_lines(
    store: AnswerRecordStore, audit: AuditLog, actor: Actor, readable: ReadsDocument
) -> Iterator[bytes]:
    """Every record of the tenant as JSON lines (an admin's export, audited), showing the
    documents the exporter reads (everything, unless their API key is limited)."""
    audit.record(actor.entry("answers.exported"))
    for record in store.export(actor.tenant_id):
        yield (json.dumps(shown(record, readable).public(), ensure_ascii=False) + "\n").encode()


def delete(store: AnswerRecordStore, audit: AuditLog, actor: Actor, before: datetime | None) -> int:
    """Delete the tenant's records (older than `before` when given); how many went, audited."""
    deleted = store.delete(actor.tenant_id, before)
    audit.record(
        actor.entry(
            "answers.deleted", before=None if before is None else before.isoformat(), count=deleted
        )
    )
    return deleted
