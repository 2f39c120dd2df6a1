"""Evaluation runs on a tenant's own questions: start one (an `evaluation_run` job of the job
table, counted in the tenant's queue quota and claimed fairly like an upload), score
each item, sum up, and compare two runs.

Per item and in aggregate: hit@1, hit@5 and MRR@10 by document and by page (the functions of
app/ranking_metrics.py, the ones our own harness uses); with answers, whether the answer cited
an expected page and whether it refused an unanswerable question; p50 and p95 latency. A run
records the corpus (version, and each document's content hash) and the settings that shape
answers, so a comparison can say what changed in between.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import TYPE_CHECKING, Any

from app.answer_shape import AnswerShape
from app.domain import ListedPage
from app.errors import JobQueueFull, NotFound, QuotaExceeded
from app.jobs.evaluation_runs import NewRun, RunRecord
from app.jobs.store import JobLimitReached
from app.ranking_metrics import cites_gold, percentile, ranking_scores
from app.timing import start_timer

if TYPE_CHECKING:
    from app.domain import RetrievalResult
    from app.jobs.evaluation_runs import EvaluationRunStore
    from app.jobs.store import JobRecord, JobStore
    from app.services.answer import AnsweredQuestion
    from app.services.audit import Actor, AuditLog
    from app.services.evaluation_access import QualityViewer
    from app.storage.documents import DocumentStore
    from app.storage.evaluation_sets import EvaluationSetStore

# Runs of one tenant queued or running at once; more wait for the tenant's own to finish.
MAX_ACTIVE_RUNS = 2
RANKED = 10  # passages retrieved per question: MRR@10 needs the top 10
METRICS = ("hit@1", "hit@5", "mrr@10")

Search = Callable[[str, str, int], "RetrievalResult"]  # (tenant, question, k) -> result
Answer = Callable[[str, str], "AnsweredQuestion"]  # (tenant, question) -> answer


@dataclass(frozen=True)
class RunDeps:
    """What starting and reading runs needs."""

    runs: EvaluationRunStore
    sets: EvaluationSetStore
    documents: DocumentStore
    audit: AuditLog
    corpus_version: Callable[[str], int]
    shape: AnswerShape
    jobs: JobStore
    queued_jobs_limit: int  # RAG_QUOTA_QUEUED_JOBS: a run takes one of these slots
    enqueue: Callable[[JobRecord], None]  # hands the run's job to the deployment's workers


def _documents(
    documents: DocumentStore, tenant_id: str, hidden: Callable[[str], bool]
) -> dict[str, dict[str, str]]:
    """The tenant's documents now that the run's starter reads: id -> {source, sha256}."""
    found: dict[str, dict[str, str]] = {}
    offset = 0
    while True:
        batch = documents.list(tenant_id, 500, offset)
        for doc in batch:
            if not hidden(doc.document_id):
                found[doc.document_id] = {"source": doc.source, "sha256": doc.content_sha256}
        if len(batch) < 500:
            return found
        offset += 500


def start(
    deps: RunDeps, actor: Actor, viewer: QualityViewer, *, set_id: str, answers: bool
) -> RunRecord:
    """Queue a run of a set the caller sees (202), within the collections the caller's
    credential reads now; QuotaExceeded when the tenant already has MAX_ACTIVE_RUNS waiting or
    running, JobQueueFull (429) when its job queue is at RAG_QUOTA_QUEUED_JOBS."""
    tenant_id = actor.tenant_id
    found = deps.sets.get(tenant_id, set_id)
    if found is None or not viewer.sees_set(found):
        raise NotFound("no such evaluation set")
    if deps.runs.count_active(tenant_id) >= MAX_ACTIVE_RUNS:
        raise QuotaExceeded(
            "evaluation_runs",
            f"you already have {MAX_ACTIVE_RUNS} evaluation runs waiting or running; "
            "wait for one to finish",
        )
    new = NewRun(
        set_id=set_id,
        answers=answers,
        total=found.item_count,
        corpus_version=deps.corpus_version(tenant_id),
        documents=_documents(deps.documents, tenant_id, viewer.hidden),
        settings=deps.shape.model_dump(mode="json"),
        created_by=actor.user_id,
        collections=tuple(sorted(viewer.access.readable)),
    )
    limit = deps.queued_jobs_limit
    try:
        job = deps.jobs.queue_evaluation_run(
            tenant_id,
            limit,
            found.name,
            found.item_count,
            actor.user_id,
            lambda session, job_id: deps.runs.add(session, tenant_id, new, job_id),
        )
    except JobLimitReached:
        raise JobQueueFull(
            f"tenant quota exceeded: queued_jobs (limit {limit} jobs waiting or running); "
            "retry when some have finished",
            retry_after_s=5.0,
        ) from None
    run = deps.runs.get(tenant_id, job.job_id, with_results=False)  # as queued
    assert run is not None
    deps.enqueue(job)
    deps.audit.record(
        actor.entry("evaluation.run_started", target_id=run.run_id, set_id=set_id, answers=answers)
    )
    return run


def get(deps: RunDeps, viewer: QualityViewer, *, run_id: str) -> RunRecord:
    """A run of the caller's tenant that the caller sees, as they may see it (NotFound
    otherwise, the same as for a missing run)."""
    found = deps.runs.get(viewer.access.tenant_id, run_id)
    if found is None or not viewer.sees_run(found):
        raise NotFound("no such evaluation run")
    return viewer.redacted(found)


def page(
    deps: RunDeps, viewer: QualityViewer, limit: int, offset: int, *, set_id: str | None
) -> ListedPage[RunRecord]:
    """The runs the caller sees, oldest first, as they may see them, and how many in all."""
    found = deps.runs.page(
        viewer.access.tenant_id,
        limit,
        offset,
        set_id,
        visible=None if viewer.sees_all else viewer.sees_run,
    )
    return ListedPage([viewer.redacted(run) for run in found.records], found.total)


# --- scoring ---


def _ranked_keys(result: RetrievalResult) -> tuple[list[str], list[str]]:
    """Documents and pages (`document_id#page`) in rank order, each at its first place."""
    documents = [hit.chunk.document_id for hit in result.hits]
    pages = [f"{hit.chunk.document_id}#{hit.chunk.page}" for hit in result.hits]
    return list(dict.fromkeys(documents)), list(dict.fromkeys(pages))


def _gold(item: dict[str, Any]) -> tuple[set[str], set[str]]:
    expected = item["expected"]
    documents = {e["document_id"] for e in expected}
    pages = {f"{e['document_id']}#{e['page']}" for e in expected if e.get("page") is not None}
    return documents, pages


def score_item(
    item: dict[str, Any],
    result: RetrievalResult,
    retrieval_ms: float,
    answered: AnsweredQuestion | None = None,
    answer_ms: float = 0.0,
) -> dict[str, Any]:
    """One item's scores: by document and page (answerable items), gate and answer outcomes."""
    documents, pages = _ranked_keys(result)
    gold_documents, gold_pages = _gold(item)
    scored: dict[str, Any] = {
        "question": item["question"],
        "answerable": item["answerable"],
        "expected": item["expected"],
        "retrieved": [
            {"document_id": h.chunk.document_id, "source": h.chunk.source, "page": h.chunk.page}
            for h in result.hits
        ],
        "gate_refused": not result.relevant,
        "document": ranking_scores(documents, gold_documents) if gold_documents else None,
        "page": ranking_scores(pages, gold_pages) if gold_pages else None,
        "latency_ms": round(retrieval_ms + answer_ms, 1),
        "retrieval_ms": round(retrieval_ms, 1),
    }
    if answered is not None:
        cited_pages = {f"{c.document_id}#{c.page}" for c in answered.citations}
        cited_documents = {c.document_id for c in answered.citations}
        scored["answer"] = {
            "refused": answered.refused,
            "cited": sorted(cited_pages),
            "cites_expected": cites_gold(cited_pages, gold_pages)
            if gold_pages
            else cites_gold(cited_documents, gold_documents),
            "answer_id": answered.answer_id,
        }
    return scored


def _mean(rows: Sequence[dict[str, float]], metric: str) -> float | None:
    return round(fmean(r[metric] for r in rows), 4) if rows else None


def _rate(values: Sequence[bool]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def summarise(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The aggregate of a run's items."""
    answerable = [r for r in results if r["answerable"] and "error" not in r]
    unanswerable = [r for r in results if not r["answerable"] and "error" not in r]
    by_document = [r["document"] for r in answerable if r["document"] is not None]
    by_page = [r["page"] for r in answerable if r["page"] is not None]
    latencies = [r["latency_ms"] for r in results if "error" not in r]
    summary: dict[str, Any] = {
        "items": len(results),
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "errors": sum("error" in r for r in results),
        **{f"document_{m}": _mean(by_document, m) for m in METRICS},
        **{f"page_{m}": _mean(by_page, m) for m in METRICS},
        "gate_refused_unanswerable": _rate([r["gate_refused"] for r in unanswerable]),
        "latency_p50_ms": round(percentile(latencies, 0.5), 1),
        "latency_p95_ms": round(percentile(latencies, 0.95), 1),
    }
    answered = [r for r in answerable if "answer" in r]
    if answered or any("answer" in r for r in unanswerable):
        summary["cites_expected"] = _rate([r["answer"]["cites_expected"] for r in answered])
        summary["refused_answerable"] = _rate([r["answer"]["refused"] for r in answered])
        summary["refused_unanswerable"] = _rate(
            [r["answer"]["refused"] for r in unanswerable if "answer" in r]
        )
    return summary


def score_question(
    item: dict[str, Any], *, tenant_id: str, search: Search, answer: Answer | None
) -> dict[str, Any]:
    """One item searched (and answered, with `answer`) and scored; an item that fails is kept
    with its error, so the run goes on."""
    try:
        timer = start_timer()
        result = search(tenant_id, item["question"], RANKED)
        retrieval_ms = timer.total_ms()
        answered, answer_ms = None, 0.0
        if answer is not None:
            timer = start_timer()
            answered = answer(tenant_id, item["question"])
            answer_ms = timer.total_ms()
        return score_item(item, result, retrieval_ms, answered, answer_ms)
    except Exception as exc:  # one bad item must not lose the rest of the run
        return {
            "question": item["question"],
            "answerable": item["answerable"],
            "expected": item["expected"],
            "error": getattr(exc, "code", type(exc).__name__),
        }


# --- comparing two runs ---


def _score(result: dict[str, Any]) -> tuple[float, float, bool | None]:
    page = result.get("page") or {}
    document = result.get("document") or {}
    cites = result.get("answer", {}).get("cites_expected")
    return page.get("mrr@10", -1.0), document.get("mrr@10", -1.0), cites


def compare(before: RunRecord, after: RunRecord) -> dict[str, Any]:
    """What changed from `before` to `after`: questions that got worse or better, the
    aggregate's change, the documents added, removed or replaced, and the settings changed."""
    earlier = {r["question"]: r for r in before.results if "question" in r}
    worse, better = [], []
    for result in after.results:
        old = earlier.get(result["question"]) if "question" in result else None
        if old is None or "error" in old or "error" in result:
            continue
        was, now = _score(old), _score(result)
        change = {"question": result["question"], "before": was[:2], "after": now[:2]}
        lost_citation = was[2] is True and now[2] is False
        if now[0] < was[0] or now[1] < was[1] or lost_citation:
            worse.append(change)
        elif now[0] > was[0] or now[1] > was[1] or (was[2] is False and now[2] is True):
            better.append(change)
    old_docs, new_docs = before.documents, after.documents
    replaced = [
        d for d in new_docs if d in old_docs and new_docs[d]["sha256"] != old_docs[d]["sha256"]
    ]
    # From the documents the runs' starters read, never the tenant's corpus version: that one
    # moves with collections the viewer may not read (and is the time of the last change).
    corpus_changed = bool(replaced) or old_docs.keys() != new_docs.keys()
    return {
        "before": before.run_id,
        "after": after.run_id,
        "worse": worse,
        "better": better,
        "summary_change": {
            name: round(value - before.summary[name], 4)
            for name, value in after.summary.items()
            if isinstance(value, float | int) and isinstance(before.summary.get(name), float | int)
        },
        "documents": {
            "added": sorted(new_docs[d]["source"] for d in new_docs if d not in old_docs),
            "removed": sorted(old_docs[d]["source"] for d in old_docs if d not in new_docs),
            "replaced": sorted(new_docs[d]["source"] for d in replaced),
        },
        "corpus_changed": corpus_changed,
        "settings_changed": sorted(
            name
            for name in set(before.settings) | set(after.settings)
            if before.settings.get(name) != after.settings.get(name)
        ),
    }
