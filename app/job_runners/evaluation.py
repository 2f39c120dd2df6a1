"""Executing evaluation runs: `evaluation_run` jobs of the job table, claimed fairly like any
other job and run here (the results go to the evaluation tables, app/jobs/evaluation_runs.py).

Who claims them, from the job table in its fair order, one at a time:
- `threads` backend: the API process's evaluation runner (a thread of its own beside the job
  pool, so a run never holds a thread that uploads need);
- `redis` backend: an rq worker takes the runs without answers (`run_job` is handed each one);
  a run with `answers: true` needs the API process's answer admission, so the API process's
  evaluation runner claims those (and only those), heart-beating like a worker.

A run shares its tenant's budgets: each item counts as one search or question against its
starter's RAG_RATE_LIMIT_QUERY_PER_MINUTE (the key /query and /search use), of which a run uses
at most half, so the person can still ask; past that, the run waits for the budget. One runner
advances up to MAX_INTERLEAVED claimed runs an item at a time, in turn, so a run waiting for its
budget (or a long one) never holds back another tenant's run.

It yields to people: between items it pauses, and its answers go through the same admission
(the answer lane's limiter, counted against the tenant) as anyone's, on the app's event loop,
as background work: a person's question waiting for a slot is admitted before them, even one
that arrived later. Questions of a run
are not written to the answer record (they are nobody's answers). A run searches and answers
within the collections its starter's credential read when it started (an API key limited to
some collections starts runs limited to them), narrowed by what that person reads when it
executes (a grant revoked since counts). A run interrupted by a shutdown goes back to the queue
and starts over.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.jobs.scheduling import ClaimScope
from app.jobs.store import JobDone, JobRecord
from app.services import answer as answer_service
from app.services import evaluation_runs as runs_service
from app.services.blocks.admission import Caller
from app.storage.rate_limit import query_rate_key
from app.wakeable_thread import WakeableThread

if TYPE_CHECKING:
    from app.domain import RetrievalResult
    from app.jobs.evaluation_runs import EvaluationRunStore, RunRecord
    from app.jobs.store import JobStore
    from app.retrieval.scope import SearchScope
    from app.services.answer import AnswerDeps, AnsweredQuestion
    from app.services.blocks.answer_lane import AnswerLane
    from app.storage.evaluation_sets import EvaluationSetStore
    from app.storage.rate_limit import RateDecision

log = logging.getLogger(__name__)

ANSWER_TIMEOUT_S = 600.0
STAGE = "evaluating"
# Runs one runner advances at once, an item of each in turn: a run waiting for its starter's
# query budget never holds back another tenant's.
MAX_INTERLEAVED = 4
# The share of its starter's RAG_RATE_LIMIT_QUERY_PER_MINUTE a run's items may use (each item
# counts as one search or question); the rest stays for the person.
RATE_SHARE = 0.5


@dataclass(frozen=True)
class RunnerDeps:
    """What executing runs needs."""

    runs: EvaluationRunStore
    jobs: JobStore
    sets: EvaluationSetStore
    search: Callable[[str, str, int, SearchScope], RetrievalResult]
    # What a user of a tenant reads now within the given collections (None: they are no
    # longer an enabled user of it).
    scope_of_user: Callable[[str, str, tuple[str, ...] | None], SearchScope | None]
    lane: Callable[[], AnswerLane]
    answers: Callable[[], AnswerDeps]
    # The rate limiter's `hit` (None: runs are not counted) and RAG_RATE_LIMIT_QUERY_PER_MINUTE.
    query_rate: Callable[[str, int], RateDecision] | None = None
    query_per_minute: int = 120
    pause_s: float = 0.02  # between items: the run gives the CPU back to people's requests
    max_running_per_tenant: int | None = None  # RAG_MAX_RUNNING_JOBS_PER_TENANT
    heartbeat_s: float = 10.0  # RAG_JOB_HEARTBEAT_S (claiming from the table itself)


class EvaluationRunner:
    """Claims evaluation runs' jobs from the job table and runs them until stopped (`wake()`
    after one is queued); an rq worker hands it the ones it claimed (`run_job`)."""

    def __init__(self, deps: RunnerDeps, poll_interval_s: float = 2.0) -> None:
        self._deps = deps
        self._poll = poll_interval_s
        self._thread = WakeableThread(self._run, "evaluation")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scope: ClaimScope = "evaluations"

    def start(self, loop: asyncio.AbstractEventLoop | None, scope: ClaimScope) -> None:
        """Start the thread that claims the runs of `scope` (`evaluations`: all of them;
        `api`: those that answer, which the Redis backend's workers leave); `loop` is the app's
        event loop (answers are admitted there)."""
        self._loop = loop
        self._scope = scope
        try:
            if failed := self._deps.runs.fail_jobless():
                log.warning("failed evaluation runs queued without a job", extra={"count": failed})
        except Exception:
            log.exception("could not check for evaluation runs without a job")
        self._thread.start()

    def wake(self) -> None:
        """A run was queued: claim it now rather than at the next poll."""
        self._thread.wake()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop after the current item (the run goes back to the queue)."""
        self._thread.stop(timeout_s)

    def _run(self) -> None:
        """Claim runs and advance them an item at a time, in turn (see `_Execution`)."""
        from app.job_runners.redis_worker import Heartbeat

        deps = self._deps
        active: list[_Execution] = []
        beats: dict[str, ExitStack] = {}  # each active run's heartbeat: closing it stops it
        claim_at = 0.0
        try:
            while not self._thread.stopping:
                now = time.monotonic()
                woken = self._thread.take_wake()  # (full: a freed place claims at the next poll)
                if len(active) < MAX_INTERLEAVED and (woken or now >= claim_at):
                    claim_at = now + self._poll
                    while len(active) < MAX_INTERLEAVED and (claimed := self._claim()):
                        beat = beats[claimed.job_id] = ExitStack()
                        beat.enter_context(Heartbeat(deps.jobs, claimed.job_id, deps.heartbeat_s))
                        try:
                            execution = self._begin(claimed)
                        except Exception:  # the database, say: its heartbeat stops, and the
                            # stale-job sweep puts it back in the queue
                            log.exception("could not start an evaluation run")
                            execution = None
                        if execution is None:
                            beats.pop(claimed.job_id).close()
                        else:
                            active.append(execution)
                ready = [e for e in active if e.ready_at <= now]
                if not ready:
                    soonest = min([claim_at, *(e.ready_at for e in active)])
                    self._thread.wait(max(0.0, soonest - now))
                    continue
                execution = ready[0]
                active.remove(execution)
                if self._advance(execution):
                    beats.pop(execution.job.job_id).close()
                else:
                    active.append(execution)  # to the back: the others' items go first
        finally:
            for execution in active:  # stopping: back in the queue, started over next time
                self._pause(execution)
            for beat in beats.values():
                beat.close()

    def _claim(self) -> JobRecord | None:
        deps = self._deps
        try:
            return deps.jobs.claim_next(deps.max_running_per_tenant, scope=self._scope)
        except Exception:
            log.exception("could not claim an evaluation run")
            return None

    def run_job(self, job: JobRecord) -> None:
        """Run a claimed `evaluation_run` job to its end (an rq worker's: this run only, waiting
        for its starter's query budget when it runs out) and record how it ended, on the job
        and the run; never raises."""
        execution = self._begin(job)
        while execution is not None and not self._advance(execution):
            time.sleep(max(0.0, execution.ready_at - time.monotonic()))

    def _begin(self, job: JobRecord) -> _Execution | None:
        """The run of a claimed job, started; None when it cannot run (recorded as failed)."""
        deps = self._deps
        run = deps.runs.get(job.tenant_id, job.job_id, with_results=False)
        if run is None:
            deps.jobs.mark_failed(job.job_id, "its evaluation run was not recorded", "not_found")
            return None
        deps.runs.started(run.run_id)
        try:
            found = deps.sets.get(run.tenant_id, run.set_id)
            if found is None:
                self._fail(run, job, "its evaluation set was deleted", "not_found")
                return None
            scope = (
                deps.scope_of_user(run.tenant_id, run.created_by, run.collections)
                if run.created_by
                else None
            )
            if scope is None:
                self._fail(run, job, "the person who started it is no longer a user", "forbidden")
                return None
        except Exception as exc:
            log.exception("evaluation run failed", extra={"run_id": run.run_id})
            self._fail(run, job, f"{type(exc).__name__}: {exc}")
            return None
        return _Execution(run, job, found.items, scope)

    def _within_budget(self, execution: _Execution) -> bool:
        """Whether the run's starter has query budget for one more item (counted as one of
        their searches or questions); if not, when it will have (`ready_at`)."""
        deps, user_id = self._deps, execution.run.created_by
        if deps.query_rate is None or not user_id:
            return True
        share = max(1, int(deps.query_per_minute * RATE_SHARE))
        decision = deps.query_rate(query_rate_key(user_id), share)
        if not decision.allowed:
            execution.ready_at = time.monotonic() + max(decision.retry_after_s, 0.05)
        return decision.allowed

    def _advance(self, execution: _Execution) -> bool:
        """Score the run's next item, or wait for budget; True when the run has ended (done,
        failed, or back in the queue because the runner stops)."""
        deps = self._deps
        run, job = execution.run, execution.job
        try:
            if not self._within_budget(execution):
                return False

            def search(tenant_id: str, question: str, k: int) -> RetrievalResult:
                return deps.search(tenant_id, question, k, execution.scope)

            def answer(tenant_id: str, question: str) -> AnsweredQuestion:
                return self._answer(tenant_id, question, execution.scope)

            item = execution.items[len(execution.results)]
            scored = runs_service.score_question(
                item, tenant_id=run.tenant_id, search=search, answer=answer if run.answers else None
            )
            execution.results.append(scored)
            done = len(execution.results)
            deps.runs.progress(run.run_id, done)
            deps.jobs.update_progress(job.job_id, done, run.progress_total, STAGE)
            if done < len(execution.items):
                time.sleep(deps.pause_s)  # the CPU back to people's requests
                return False
            results = execution.results
            deps.runs.finish(run.run_id, runs_service.summarise(results), results)
            deps.jobs.mark_done_many([JobDone(job.job_id, 0, 0, units=len(results))])
            log.info("evaluation run done", extra={"run_id": run.run_id, "items": len(results)})
        except _Stopped:
            self._pause(execution)
        except Exception as exc:
            log.exception("evaluation run failed", extra={"run_id": run.run_id})
            self._fail(run, job, f"{type(exc).__name__}: {exc}")
        return True

    def _fail(
        self, run: RunRecord, job: JobRecord, message: str, code: str = "evaluation_failed"
    ) -> None:
        self._deps.runs.fail(run.run_id, message)
        self._deps.jobs.mark_failed(job.job_id, message, code)

    def _pause(self, execution: _Execution) -> None:
        """Back in the queue, not a failed attempt: the next claim starts it over."""
        self._deps.jobs.pause(execution.job.job_id)
        self._deps.runs.queued_again(execution.run.run_id)
        log.info("evaluation run interrupted by shutdown", extra={"run_id": execution.run.run_id})

    def _answer(self, tenant_id: str, question: str, scope: SearchScope) -> AnsweredQuestion:
        """An answer through the same admission as people's, after theirs (lower priority)."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("answers need the app's event loop")
        # Background: admitted only while no person's question waits for a slot, even one that
        # comes after this; "" as the user: no answer record for a run's questions.
        caller = Caller(tenant_id, "", background=True)
        lane = self._deps.lane()
        asked = answer_service.Question(caller, question, None, scope)
        coroutine = answer_service.answer(lane, self._deps.answers(), asked)
        pending = asyncio.run_coroutine_threadsafe(coroutine, loop)
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while not self._thread.stopping and time.monotonic() < deadline:
            try:
                answered: AnsweredQuestion = pending.result(timeout=0.5)
                return answered
            except concurrent.futures.TimeoutError:
                continue
        pending.cancel()  # leaves the admission queue, or stops the answer
        if self._thread.stopping:
            raise _Stopped
        raise TimeoutError(f"no answer within {ANSWER_TIMEOUT_S:g} s")


@dataclass
class _Execution:
    """A run being executed: its items, what it searches, the results so far, and when its
    starter's query budget lets it go on."""

    run: RunRecord
    job: JobRecord
    items: list[dict[str, Any]]
    scope: SearchScope
    results: list[dict[str, Any]] = field(default_factory=list)
    ready_at: float = 0.0  # time.monotonic()


class _Stopped(BaseException):
    """The runner is stopping: the run goes back to the queue (a BaseException, so scoring an
    item does not take it for that item's error)."""
