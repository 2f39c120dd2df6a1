"""A tenant's own evaluation sets: given as JSON, uploaded as JSONL or CSV, or made from
feedback (thumbs-down with an expected page; thumbs-up with the citations that helped).

Every expected document must be one of the tenant's that its maker reads (named by file name
or id; one they may not read is refused like a missing one), resolved to
{document_id, source, page} when the set is made, so a run compares ids, not names.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.domain import ListedPage
from app.errors import InvalidInput, NotFound
from app.services.blocks.followups import question_shown
from app.services.documents import document_named
from app.storage.feedback import FeedbackFilter

if TYPE_CHECKING:
    from app.request_limits import RequestLimits
    from app.services.audit import Actor, AuditLog
    from app.services.evaluation_access import QualityViewer
    from app.storage.documents import DocumentStore
    from app.storage.evaluation_sets import EvaluationSet, EvaluationSetStore
    from app.storage.feedback import FeedbackStore

MAX_ITEMS = 1000
MAX_EXPECTED_PER_ITEM = 20
NAME_CHARS = 200
UPLOAD_BYTES = 4 * 1024 * 1024  # the body cap of the set routes (app/api/body_limit.py)


@dataclass(frozen=True)
class SetDeps:
    """What making and reading sets needs."""

    sets: EvaluationSetStore
    documents: DocumentStore
    feedback: FeedbackStore
    audit: AuditLog
    limits: RequestLimits


ReadsDocument = Callable[[str], bool]


def _reads_every_document(_document_id: str) -> bool:
    return True


def _expected(
    deps: SetDeps,
    tenant_id: str,
    given: list[dict[str, Any]],
    where: str,
    readable: ReadsDocument,
) -> list[dict[str, Any]]:
    if len(given) > MAX_EXPECTED_PER_ITEM:
        raise InvalidInput(f"{where}: at most {MAX_EXPECTED_PER_ITEM} expected pages")
    resolved = []
    for wanted in given:
        if not isinstance(wanted, dict):
            raise InvalidInput(f"{where}: each expected entry is an object with source and page")
        record = document_named(
            deps.documents,
            tenant_id=tenant_id,
            document_id=str(wanted["document_id"]) if wanted.get("document_id") else None,
            source=str(wanted["source"]) if wanted.get("source") else None,
            readable=readable,
        )
        if record is None:  # the same 422 for a missing document and one you may not read
            named = wanted.get("source") or wanted.get("document_id") or "(none)"
            raise InvalidInput(f"{where}: {named!r} is not one of your documents")
        page = wanted.get("page")
        if page is not None and (not isinstance(page, int) or isinstance(page, bool) or page < 1):
            raise InvalidInput(f"{where}: page must be a whole number from 1")
        resolved.append({"document_id": record.document_id, "source": record.source, "page": page})
    return resolved


def checked_items(
    deps: SetDeps,
    *,
    tenant_id: str,
    items: list[dict[str, Any]],
    readable: ReadsDocument = _reads_every_document,
) -> list[dict[str, Any]]:
    """Items as stored: a checked question, resolved expected pages (documents `readable` says
    the caller reads), answerable (default true). InvalidInput (422) names the first bad item."""
    if not items:
        raise InvalidInput("a set needs at least one item")
    if len(items) > MAX_ITEMS:
        raise InvalidInput(f"a set holds at most {MAX_ITEMS} items; got {len(items)}")
    checked = []
    for number, item in enumerate(items, start=1):
        where = f"item {number}"
        if not isinstance(item, dict) or not isinstance(item.get("question"), str):
            raise InvalidInput(f"{where}: needs a question")
        question = deps.limits.question(item["question"])
        answerable = item.get("answerable", True)
        if not isinstance(answerable, bool):
            raise InvalidInput(f"{where}: answerable is true or false")
        expected = _expected(deps, tenant_id, list(item.get("expected") or []), where, readable)
        if answerable and not expected:
            raise InvalidInput(f"{where}: an answerable question needs an expected document")
        checked.append({"question": question, "expected": expected, "answerable": answerable})
    return checked


def create(
    deps: SetDeps,
    actor: Actor,
    name: str,
    items: list[dict[str, Any]],
    readable: ReadsDocument = _reads_every_document,
) -> EvaluationSet:
    """A new set of the tenant (audited) whose expected documents are ones the caller reads."""
    name = name.strip()
    if not name or len(name) > NAME_CHARS:
        raise InvalidInput(f"a set's name has 1-{NAME_CHARS} characters")
    stored = deps.sets.create(
        actor.tenant_id,
        name,
        checked_items(deps, tenant_id=actor.tenant_id, items=items, readable=readable),
        actor.user_id,
    )
    deps.audit.record(
        actor.entry("evaluation.set_created", target_id=stored.set_id, items=stored.item_count)
    )
    return stored


def parse_upload(data: bytes, filename: str) -> list[dict[str, Any]]:
    """Items from an uploaded JSONL (one item per line) or CSV file (columns question, source,
    page, answerable; rows of one question add expected pages to it)."""
    if len(data) > UPLOAD_BYTES:
        raise InvalidInput(f"the file is larger than {UPLOAD_BYTES // (1024 * 1024)} MiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidInput("the file is not UTF-8 text") from None
    if filename.lower().endswith(".csv"):
        return _csv_items(text)
    items = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            raise InvalidInput(f"line {number} is not JSON") from None
        items.append(item)
    return items


def _csv_items(text: str) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or "question" not in reader.fieldnames:
        raise InvalidInput("the CSV needs a header row with a `question` column")
    items: dict[str, dict[str, Any]] = {}
    for number, row in enumerate(reader, start=2):
        question = (row.get("question") or "").strip()
        if not question:
            raise InvalidInput(f"CSV row {number}: no question")
        item = items.setdefault(question, {"question": question, "expected": []})
        answerable = (row.get("answerable") or "true").strip().lower()
        if answerable not in ("true", "false", "1", "0", "yes", "no", ""):
            raise InvalidInput(f"CSV row {number}: answerable is true or false")
        item["answerable"] = answerable in ("true", "1", "yes", "")
        source = (row.get("source") or "").strip()
        page = (row.get("page") or "").strip()
        if source:
            if page and not page.isdigit():
                raise InvalidInput(f"CSV row {number}: page must be a whole number")
            item["expected"].append({"source": source, "page": int(page) if page else None})
    return list(items.values())


def items_from_feedback(
    deps: SetDeps, *, tenant_id: str, readable: ReadsDocument = _reads_every_document
) -> list[dict[str, Any]]:
    """Items from the tenant's feedback whose answer record still holds the question:
    thumbs-down naming expected pages, and thumbs-up with the citations that helped (of those,
    the pages of documents `readable` says the caller reads). A rewritten question is taken as
    rewritten only when it may quote nothing but the item's expected documents, else as typed."""
    items: dict[str, dict[str, Any]] = {}
    for record in deps.feedback.export(tenant_id, FeedbackFilter()):
        if record.question is None:
            continue
        if record.rating == "down":
            expected = [
                {"document_id": e["document_id"], "page": e.get("page")} for e in record.expected
            ]
        else:
            helpful = set(record.helpful_markers)
            expected = [
                {"document_id": c["document_id"], "page": c.get("page")}
                for c in record.cited
                if c.get("marker") in helpful
            ]
        expected = [page for page in expected if readable(page["document_id"])]
        if not expected:
            continue
        # A set is seen by who reads its expected documents: a question rewritten from answers
        # citing any other document is taken as typed.
        expecting = {page["document_id"] for page in expected}
        question = question_shown(
            record.question,
            record.typed_question,
            record.rewrite_sources,
            expecting.__contains__,
        )
        item = items.setdefault(
            question, {"question": question, "expected": [], "answerable": True}
        )
        for page in expected:
            if page not in item["expected"]:
                item["expected"].append(page)
    return list(items.values())[:MAX_ITEMS]


def get(deps: SetDeps, viewer: QualityViewer, *, set_id: str) -> EvaluationSet:
    """A set of the caller's tenant that the caller sees, with its items (NotFound otherwise,
    the same as for a missing set)."""
    found = deps.sets.get(viewer.access.tenant_id, set_id)
    if found is None or not viewer.sees_set(found):
        raise NotFound("no such evaluation set")
    return found


def page(
    deps: SetDeps, viewer: QualityViewer, limit: int, offset: int
) -> ListedPage[EvaluationSet]:
    """The sets the caller sees (without their items), newest first, and how many in all."""
    visible = None if viewer.sees_all else viewer.sees_set
    return deps.sets.page(viewer.access.tenant_id, limit, offset, visible)


def delete(deps: SetDeps, actor: Actor, viewer: QualityViewer, *, set_id: str) -> None:
    """Delete a set the caller sees (its runs stay, for the history)."""
    get(deps, viewer, set_id=set_id)
    if not deps.sets.delete(actor.tenant_id, set_id):
        raise NotFound("no such evaluation set")
    deps.audit.record(actor.entry("evaluation.set_deleted", target_id=set_id))
