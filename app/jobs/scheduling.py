"""Which queued jobs a worker gets next: fair across tenants, in batches of one tenant's jobs.

The fairest tenant is the one with the fewest running jobs (a batch counts once), then the one
served least recently, then the one waiting longest; its oldest jobs are taken, as many as the
batch allows. Both are SQL subqueries, evaluated inside the claiming UPDATE so that no two
claimers see the same job queued.

An evaluation run is always a batch of its own (it may run for minutes). Which jobs a claimer
takes is its `ClaimScope`:
- `all`: every job;
- `jobs`: every job but evaluation runs (the threads backend's pool: a run never holds a thread
  that uploads need);
- `evaluations`: only evaluation runs (the API process's evaluation runner, threads backend);
- `worker`: every job but the evaluation runs that answer (an rq worker: their answers need the
  API process's answer admission);
- `api`: only those (the API process's evaluation runner, Redis backend).
"""

from __future__ import annotations

import functools
from typing import Any, Literal

from sqlalchemy import func, select, true

from app.storage.tables import BatchMemberRow, EvaluationRunRow, JobRow, TenantTurnRow

# The stage of a job put back after a transient failure: only its own delayed message claims it.
RETRYING = "retrying"
EVALUATION_RUN = "evaluation_run"
ClaimScope = Literal["all", "jobs", "evaluations", "worker", "api"]


def in_scope(scope: ClaimScope) -> Any:
    """The SQL condition on a job row of the jobs a claimer of `scope` takes."""
    if scope == "all":
        return true()
    evaluating = JobRow.kind == EVALUATION_RUN
    if scope in ("jobs", "evaluations"):
        return ~evaluating if scope == "jobs" else evaluating
    answering = evaluating & JobRow.job_id.in_(
        select(EvaluationRunRow.run_id).where(EvaluationRunRow.answers.is_(True))
    )
    return answering if scope == "api" else ~answering


def next_batch(
    max_running_per_tenant: int | None,
    max_jobs: int,
    max_bytes: int | None,
    scope: ClaimScope = "all",
    skip_tenants: frozenset[str] = frozenset(),
) -> Any:
    """A subquery of the job ids to claim: the fairest tenant's oldest claimable jobs, at most
    `max_jobs`, adding up to at most `max_bytes` of uploads (the first is always taken). Tenants
    in `skip_tenants` are passed over, whatever their turn.

    Built once per set of limits when no tenant is skipped (a worker claims with the same ones
    every time; building it was a third of a claim's cost): the statement holds no values of
    its own."""
    if skip_tenants:
        return _batch_of(max_running_per_tenant, max_jobs, max_bytes, scope, skip_tenants)
    return _usual_batch_of(max_running_per_tenant, max_jobs, max_bytes, scope, skip_tenants)


def _batch_of(
    max_running_per_tenant: int | None,
    max_jobs: int,
    max_bytes: int | None,
    scope: ClaimScope,
    skip_tenants: frozenset[str],
) -> Any:
    tenant = fair_tenant(max_running_per_tenant, scope, skip_tenants)
    claimable = [JobRow.tenant_id == tenant, JobRow.status == "queued", in_scope(scope)]
    claimable.append(JobRow.progress_stage != RETRYING)
    order = (JobRow.created_at, JobRow.job_id)
    ranked = (
        select(
            JobRow.job_id,
            JobRow.kind,
            func.first_value(JobRow.kind).over(order_by=order).label("first_kind"),
            func.row_number().over(order_by=order).label("position"),
            func.sum(JobRow.size_bytes).over(order_by=order).label("bytes_so_far"),
        )
        .where(*claimable)
        .subquery()
    )
    within = ranked.c.position <= max_jobs
    # An evaluation run goes alone: nothing waits behind it, nor it behind others.
    alone = (ranked.c.kind == EVALUATION_RUN) | (ranked.c.first_kind == EVALUATION_RUN)
    within &= (ranked.c.position == 1) | ~alone
    if max_bytes is not None:
        within &= (ranked.c.bytes_so_far <= max_bytes) | (ranked.c.position == 1)
    return select(ranked.c.job_id).where(within)


_usual_batch_of = functools.lru_cache(maxsize=16)(_batch_of)


def fair_tenant(
    max_running_per_tenant: int | None,
    scope: ClaimScope = "all",
    skip_tenants: frozenset[str] = frozenset(),
) -> Any:
    """A scalar subquery: the tenant `claim_next` should serve (see its docstring), never one
    of `skip_tenants`."""
    # A batch is one running job: its members count once, under the batch's id.
    slot = func.coalesce(BatchMemberRow.batch_id, JobRow.job_id)
    running = (
        select(JobRow.tenant_id, func.count(func.distinct(slot)).label("jobs"))
        .outerjoin(BatchMemberRow, BatchMemberRow.job_id == JobRow.job_id)
        .where(JobRow.status == "processing")
        .group_by(JobRow.tenant_id)
        .subquery()
    )
    claimable = [JobRow.status == "queued", JobRow.progress_stage != RETRYING, in_scope(scope)]
    if skip_tenants:
        claimable.append(JobRow.tenant_id.not_in(sorted(skip_tenants)))
    waiting = (
        select(JobRow.tenant_id, func.min(JobRow.created_at).label("oldest"))
        .where(*claimable)
        .group_by(JobRow.tenant_id)
        .subquery()
    )
    busy = func.coalesce(running.c.jobs, 0)
    never_served = TenantTurnRow.served_at.is_(None)
    tenant = (
        select(waiting.c.tenant_id)
        .outerjoin(running, running.c.tenant_id == waiting.c.tenant_id)
        .outerjoin(TenantTurnRow, TenantTurnRow.tenant_id == waiting.c.tenant_id)
        .order_by(
            busy,
            never_served.desc(),
            TenantTurnRow.served_at,
            waiting.c.oldest,
            waiting.c.tenant_id,
        )
        .limit(1)
    )
    if max_running_per_tenant is not None:
        tenant = tenant.where(busy < max_running_per_tenant)
    return tenant.scalar_subquery()
