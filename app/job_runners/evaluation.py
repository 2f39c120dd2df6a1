"""The evaluation runner: one daemon thread of the API process that takes queued evaluation
runs (app/jobs/evaluation_runs.py) and executes them.

It yields to people: between items it pauses, and before asking for an answer it waits until
no interactive answer is queued; answers then go through the same admission (the answer lane's
limiter, counted against the tenant) as anyone's, on the app's event loop. Questions of a run
are not written to the answer record (they are nobody's answers). A run searches and answers
within the collections its starter's credential read when it started (an API key limited to
some collections starts runs limited to them), narrowed by what that person reads when it
executes (a grant revoked since counts).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.services import answer as answer_service
from app.services import evaluation_runs as runs_service
from app.services.blocks.admission import Caller

if TYPE_CHECKING:
    from app.domain import RetrievalResult
    from app.jobs.evaluation_runs import EvaluationRunStore, RunRecord
    from app.retrieval.scope import SearchScope
    from app.services.answer import AnswerDeps, AnsweredQuestion
    from app.services.blocks.answer_lane import AnswerLane
    from app.storage.evaluation_sets import EvaluationSetStore

log = logging.getLogger(__name__)

ANSWER_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class RunnerDeps:
    """What executing runs needs."""

    runs: EvaluationRunStore
    sets: EvaluationSetStore
    search: Callable[[str, str, int, SearchScope], RetrievalResult]
    # What a user of a tenant reads now within the given collections (None: they are no
    # longer an enabled user of it).
    scope_of_user: Callable[[str, str, tuple[str, ...] | None], SearchScope | None]
    lane: Callable[[], AnswerLane]
    answers: Callable[[], AnswerDeps]
    pause_s: float = 0.02  # between items: the run gives the CPU back to people's requests


class EvaluationRunner:
    """Takes queued runs one at a time until stopped; `wake()` after a run is queued."""

    def __init__(self, deps: RunnerDeps, poll_interval_s: float = 2.0) -> None:
        self._deps = deps
        self._poll = poll_interval_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Start the thread; `loop` is the app's event loop (answers are admitted there)."""
        self._loop = loop
        self._thread = threading.Thread(target=self._run, name="evaluation", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """A run was queued: claim it now rather than at the next poll."""
        self._wake.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop after the current item (the run is queued again by the stale check)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                run = self._deps.runs.claim_next()
            except Exception:
                log.exception("could not claim an evaluation run")
                run = None
            if run is None:
                self._wake.wait(self._poll)
                self._wake.clear()
                continue
            self.execute(run)

    def execute(self, run: RunRecord) -> None:
        """Run every item of the run's set and store the results (or the failure)."""
        deps = self._deps
        try:
            found = deps.sets.get(run.tenant_id, run.set_id)
            if found is None:
                deps.runs.fail(run.run_id, "its evaluation set was deleted")
                return
            scope = (
                deps.scope_of_user(run.tenant_id, run.created_by, run.collections)
                if run.created_by
                else None
            )
            if scope is None:
                deps.runs.fail(run.run_id, "the person who started it is no longer a user")
                return

            def search(tenant_id: str, question: str, k: int) -> RetrievalResult:
                return deps.search(tenant_id, question, k, scope)

            def answer(tenant_id: str, question: str) -> AnsweredQuestion:
                return self._answer(tenant_id, question, scope)

            def progress(done: int) -> None:
                deps.runs.progress(run.run_id, done)
                if self._stop.is_set():
                    raise _Stopped
                time.sleep(deps.pause_s)

            results = runs_service.run_items(
                found.items, run.tenant_id, search, answer if run.answers else None, progress
            )
            deps.runs.finish(run.run_id, runs_service.summarise(results), results)
            log.info("evaluation run done", extra={"run_id": run.run_id, "items": len(results)})
        except _Stopped:
            deps.runs.requeue(run.run_id)  # the next start takes it again from the beginning
            log.info("evaluation run interrupted by shutdown", extra={"run_id": run.run_id})
        except Exception as exc:
            log.exception("evaluation run failed", extra={"run_id": run.run_id})
            deps.runs.fail(run.run_id, f"{type(exc).__name__}: {exc}")

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
    """The runner is stopping: leave the run for the stale check to queue again."""
