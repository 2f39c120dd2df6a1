"""Executing evaluation runs: `evaluation_run` jobs of the job table, claimed fairly like any
other job and run here (the results go to the evaluation tables, app/jobs/evaluation_runs.py).

Who claims them, from the job table in its fair order, one at a time:
- `threads` backend: the API process's evaluation runner (a thread of its own beside the job
  pool, so a run never holds a thread that uploads need);
- `redis` backend: an rq worker takes the runs without answers (`run_job` is handed each one);
  a run with `answers: true` needs the API process's answer admission, so the API process's
  evaluation runner claims those (and only those), heart-beating like a worker.

It yields to people: between items it pauses, and before asking for an answer it waits until
no interactive answer is queued; answers then go through the same admission (the answer lane's
limiter, counted against the tenant) as anyone's, on the app's event loop. Questions of a run
are not written to the answer record (they are nobody's answers). A run searches and answers
within the collections its starter's credential read when it started (an API key limited to
some collections starts runs limited to them), narrowed by what that person reads when it
executes (a grant revoked since counts). A run interrupted by a shutdown goes back to the queue
and starts over.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.jobs.scheduling import ClaimScope
from app.jobs.store import JobDone, JobRecord
from app.services import answer as answer_service
from app.services import evaluation_runs as runs_service
from app.services.blocks.admission import Caller

if TYPE_CHECKING:
    from app.domain import RetrievalResult
    from app.jobs.evaluation_runs import EvaluationRunStore, RunRecord
    from app.jobs.store import JobStore
    from app.retrieval.scope import SearchScope
    from app.services.answer import AnswerDeps, AnsweredQuestion
    from app.services.blocks.answer_lane import AnswerLane
    from app.storage.evaluation_sets import EvaluationSetStore

log = logging.getLogger(__name__)

ANSWER_TIMEOUT_S = 600.0
STAGE = "evaluating"


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
    pause_s: float = 0.02  # between items: the run gives the CPU back to people's requests
    max_running_per_tenant: int | None = None  # RAG_MAX_RUNNING_JOBS_PER_TENANT
    heartbeat_s: float = 10.0  # RAG_JOB_HEARTBEAT_S (claiming from the table itself)


class EvaluationRunner:
    """Claims evaluation runs' jobs from the job table and runs them until stopped (`wake()`
    after one is queued); an rq worker hands it the ones it claimed (`run_job`)."""

    def __init__(self, deps: RunnerDeps, poll_interval_s: float = 2.0) -> None:
        self._deps = deps
        self._poll = poll_interval_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
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
        self._thread = threading.Thread(target=self._run, name="evaluation", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """A run was queued: claim it now rather than at the next poll."""
        self._wake.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop after the current item (the run goes back to the queue)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        from app.job_runners.redis_worker import Heartbeat

        deps = self._deps
        while not self._stop.is_set():
            try:
                claimed = deps.jobs.claim_next(deps.max_running_per_tenant, scope=self._scope)
            except Exception:
                log.exception("could not claim an evaluation run")
                claimed = None
            if claimed is None:
                self._wake.wait(self._poll)
                self._wake.clear()
                continue
            with Heartbeat(deps.jobs, claimed.job_id, deps.heartbeat_s):
                self.run_job(claimed)

    def run_job(self, job: JobRecord) -> None:
        """Run a claimed `evaluation_run` job and record how it ended, on the job and the run;
        never raises."""
        deps = self._deps
        run = deps.runs.get(job.tenant_id, job.job_id, with_results=False)
        if run is None:
            deps.jobs.mark_failed(job.job_id, "its evaluation run was not recorded", "not_found")
            return
        deps.runs.started(run.run_id)
        self.execute(run, job)

    def execute(self, run: RunRecord, job: JobRecord) -> None:
        """Run every item of the run's set and store the results (or the failure)."""
        deps = self._deps

        def fail(message: str, code: str = "evaluation_failed") -> None:
            deps.runs.fail(run.run_id, message)
            deps.jobs.mark_failed(job.job_id, message, code)

        try:
            found = deps.sets.get(run.tenant_id, run.set_id)
            if found is None:
                fail("its evaluation set was deleted", "not_found")
                return
            scope = (
                deps.scope_of_user(run.tenant_id, run.created_by, run.collections)
                if run.created_by
                else None
            )
            if scope is None:
                fail("the person who started it is no longer a user", "forbidden")
                return

            def search(tenant_id: str, question: str, k: int) -> RetrievalResult:
                return deps.search(tenant_id, question, k, scope)

            def answer(tenant_id: str, question: str) -> AnsweredQuestion:
                return self._answer(tenant_id, question, scope)

            def progress(done: int) -> None:
                deps.runs.progress(run.run_id, done)
                deps.jobs.update_progress(job.job_id, done, run.progress_total, STAGE)
                if self._stop.is_set():
                    raise _Stopped
                time.sleep(deps.pause_s)

            results = runs_service.run_items(
                found.items,
                tenant_id=run.tenant_id,
                search=search,
                answer=answer if run.answers else None,
                progress=progress,
            )
            deps.runs.finish(run.run_id, runs_service.summarise(results), results)
            deps.jobs.mark_done_many([JobDone(job.job_id, 0, 0, units=len(results))])
            log.info("evaluation run done", extra={"run_id": run.run_id, "items": len(results)})
        except _Stopped:
            # Back in the queue, not a failed attempt: the next claim starts it over.
            deps.jobs.pause(job.job_id)
            deps.runs.queued_again(run.run_id)
            log.info("evaluation run interrupted by shutdown", extra={"run_id": run.run_id})
        except Exception as exc:
            log.exception("evaluation run failed", extra={"run_id": run.run_id})
            fail(f"{type(exc).__name__}: {exc}")

    def _answer(self, tenant_id: str, question: str, scope: SearchScope) -> AnsweredQuestion:
        """An answer through the same admission as people's, after theirs (lower priority)."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("answers need the app's event loop")
        lane = self._deps.lane()
        while lane.answers.waiting > 0 and not self._stop.is_set():
            time.sleep(0.1)  # people are queued for an answer slot: they go first
        caller = Caller(tenant_id, "")  # "": no answer record for a run's questions
        coroutine = answer_service.answer(lane, self._deps.answers(), caller, question, None, scope)
        answered: AnsweredQuestion = asyncio.run_coroutine_threadsafe(coroutine, loop).result(
            ANSWER_TIMEOUT_S
        )
        return answered


class _Stopped(Exception):
    """The runner is stopping: the run goes back to the queue."""
