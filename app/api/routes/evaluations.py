"""Evaluation on the tenant's own questions: sets (given, uploaded, or made from feedback),
runs as background jobs (202, then poll), and the comparison of two runs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from app.api.access import Authorized
from app.api.deps import (
    ClientIp,
    EvaluationRunnerDep,
    EvaluationRunning,
    EvaluationSets,
    PageOffset,
    PageSize,
    QualityViewerDep,
    ReadableDocuments,
)
from app.api.errors import error_responses
from app.api.quality_schemas import (
    EvaluationRunIn,
    EvaluationRunOut,
    EvaluationSetFromFeedbackIn,
    EvaluationSetIn,
    EvaluationSetOut,
)
from app.api.records import Page
from app.errors import InvalidInput
from app.services import evaluation_runs, evaluation_sets

router = APIRouter(tags=["evaluation"], responses=error_responses(403, 404, 422))


@router.post("/evaluations/sets", status_code=201, response_model=EvaluationSetOut)
def create_set(
    body: EvaluationSetIn,
    deps: EvaluationSets,
    caller: Authorized,
    ip: ClientIp,
    readable: ReadableDocuments,
) -> EvaluationSetOut:
    """A test set of your own questions (up to 1,000), each with the documents (and pages)
    that answer it, or `answerable: false`."""
    items = [item.model_dump() for item in body.items]
    found = evaluation_sets.create(deps, caller.actor(ip), body.name, items, readable)
    return EvaluationSetOut.model_validate(found)


@router.post(
    "/evaluations/sets/upload",
    status_code=201,
    response_model=EvaluationSetOut,
    openapi_extra={
        "requestBody": {
            "content": {"application/x-ndjson": {}, "text/csv": {}},
            "description": "JSONL (one item per line) or CSV (question, source, page, answerable)",
        }
    },
)
async def upload_set(
    request: Request,
    deps: EvaluationSets,
    caller: Authorized,
    ip: ClientIp,
    readable: ReadableDocuments,
    name: Annotated[str, Query(min_length=1, max_length=200)],
    format: Annotated[str, Query(pattern="^(jsonl|csv)$")] = "jsonl",
) -> EvaluationSetOut:
    """A test set from a JSONL or CSV file sent as the body."""
    data = await request.body()
    items = evaluation_sets.parse_upload(data, f"set.{format}")
    found = evaluation_sets.create(deps, caller.actor(ip), name, items, readable)
    return EvaluationSetOut.model_validate(found)


@router.post("/evaluations/sets/from-feedback", status_code=201, response_model=EvaluationSetOut)
def set_from_feedback(
    body: EvaluationSetFromFeedbackIn,
    deps: EvaluationSets,
    caller: Authorized,
    ip: ClientIp,
    readable: ReadableDocuments,
) -> EvaluationSetOut:
    """A test set from feedback: each thumbs-down that names expected pages, and each thumbs-up
    with the citations that helped (while the answer record keeps their questions), of the
    documents you read."""
    items = evaluation_sets.items_from_feedback(deps, tenant_id=caller.tenant_id, readable=readable)
    if not items:
        raise InvalidInput(
            "no feedback to make a set from: rate answers down naming the page they should have "
            "used, or up naming the citations that helped"
        )
    found = evaluation_sets.create(deps, caller.actor(ip), body.name, items, readable)
    return EvaluationSetOut.model_validate(found)


@router.get("/evaluations/sets", response_model=Page[EvaluationSetOut])
def list_sets(
    deps: EvaluationSets,
    caller: Authorized,
    viewer: QualityViewerDep,
    size: PageSize,
    offset: PageOffset = 0,
) -> Page[EvaluationSetOut]:
    """Your tenant's test sets that you see (you read every document they expect), newest
    first (without their items)."""
    found = evaluation_sets.page(deps, viewer, size, offset)
    return Page[EvaluationSetOut].of(found.records, found.total)


@router.get("/evaluations/sets/{set_id}", response_model=EvaluationSetOut)
def get_set(
    set_id: str, deps: EvaluationSets, caller: Authorized, viewer: QualityViewerDep
) -> EvaluationSetOut:
    """One test set with its items (404 unless you read every document it expects)."""
    return EvaluationSetOut.model_validate(evaluation_sets.get(deps, viewer, set_id=set_id))


@router.delete("/evaluations/sets/{set_id}", status_code=204)
def delete_set(
    set_id: str, deps: EvaluationSets, caller: Authorized, ip: ClientIp, viewer: QualityViewerDep
) -> None:
    """Delete a test set you see (its runs stay in the history)."""
    evaluation_sets.delete(deps, caller.actor(ip), viewer, set_id=set_id)


@router.post(
    "/evaluations/runs",
    status_code=202,
    response_model=EvaluationRunOut,
    responses=error_responses(413),
)
def start_run(
    body: EvaluationRunIn,
    deps: EvaluationRunning,
    runner: EvaluationRunnerDep,
    caller: Authorized,
    ip: ClientIp,
    viewer: QualityViewerDep,
) -> EvaluationRunOut:
    """Run a test set in the background (202) within the collections your credential reads
    now; poll GET /evaluations/runs/{run_id}. 413 `quota_exceeded` when two of your runs are
    already waiting or running."""
    run = evaluation_runs.start(
        deps, caller.actor(ip), viewer, set_id=body.set_id, answers=body.answers
    )
    runner.wake()
    return EvaluationRunOut.model_validate(run)


@router.get("/evaluations/runs", response_model=Page[EvaluationRunOut])
def list_runs(
    deps: EvaluationRunning,
    caller: Authorized,
    viewer: QualityViewerDep,
    size: PageSize,
    offset: PageOffset = 0,
    set_id: Annotated[str | None, Query(max_length=32)] = None,
) -> Page[EvaluationRunOut]:
    """Your tenant's runs that you see (you read every collection they read), oldest first,
    with their aggregates (the history to chart)."""
    found = evaluation_runs.page(deps, viewer, size, offset, set_id=set_id)
    return Page[EvaluationRunOut].of(found.records, found.total)


@router.get("/evaluations/runs/{run_id}", response_model=EvaluationRunOut)
def get_run(
    run_id: str, deps: EvaluationRunning, caller: Authorized, viewer: QualityViewerDep
) -> EvaluationRunOut:
    """One run: progress, and once done its aggregate and per-item results (404 unless you
    read every collection it read; what names a document you do not read is withheld)."""
    return EvaluationRunOut.model_validate(evaluation_runs.get(deps, viewer, run_id=run_id))


@router.get("/evaluations/runs/{run_id}/compare")
def compare_runs(
    run_id: str,
    deps: EvaluationRunning,
    caller: Authorized,
    before: Annotated[str, Query(min_length=1, max_length=32, description="the earlier run")],
    viewer: QualityViewerDep,
) -> dict[str, Any]:
    """What changed since an earlier run: questions that got worse or better, the aggregate's
    change, documents added, removed or replaced, settings changed."""
    earlier = evaluation_runs.get(deps, viewer, run_id=before)
    later = evaluation_runs.get(deps, viewer, run_id=run_id)
    return evaluation_runs.compare(earlier, later)
