"""An evaluation run is a job of the job table: the rq worker claims and runs a run without
answers like an upload's job (progress and end on the job, results in the run), leaves a run
that answers to the API process, and a run left `processing` by a dead worker is taken again
by the sweep and finished by the next worker."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from app.container import Container
from app.job_runners.redis_worker import IngestWorker
from app.jobs.redis_queue import RedisJobQueue, message_pending
from app.services import evaluation_runs, evaluation_sets
from app.services.audit import Actor
from app.services.evaluation_access import QualityViewer
from app.storage.db import utc_now
from tests.scaleout.job_container import queued_upload, work_through

pytestmark = pytest.mark.integration

T = "acme"
ITEMS = [
    {
        "question": "How often is the relief valve inspected?",
        "expected": [{"source": "valves.txt"}],
        "answerable": True,
    },
    {
        "question": "Who gets the reports?",
        "expected": [{"source": "valves.txt"}],
        "answerable": True,
    },
]


@pytest.fixture
def indexed(container: Container, worker: IngestWorker, data_dir: Path) -> None:
    """The document the runs evaluate, uploaded and indexed by the worker."""
    queued_upload(container, data_dir)
    work_through(container, worker)


def _start(container: Container, worker: IngestWorker, answers: bool) -> str:
    """Start a run as POST /evaluations/runs does, its job sent to the Redis queue."""
    user = container.user_store.get_by_username(T, "eva") or container.user_store.add(
        T, "eva", "x", "admin"
    )
    access = container.collection_access.resolve(tenant_id=T, user_id=user.id, role="admin")
    viewer = QualityViewer.of(access, container.search_scopes, role="admin", user_id=user.id)
    actor = Actor(T, user.id, None)
    found = evaluation_sets.create(container.evaluation_set_deps, actor, "valves", ITEMS)
    queue = RedisJobQueue(worker.queue, 60)
    deps = replace(container.evaluation_run_deps, enqueue=queue.enqueue)
    return evaluation_runs.start(deps, actor, viewer, set_id=found.set_id, answers=answers).run_id


@pytest.mark.usefixtures("indexed")
def test_the_rq_worker_runs_a_run_as_a_job_and_leaves_answering_runs_to_the_api(
    container: Container, worker: IngestWorker
) -> None:
    retrieval = _start(container, worker, answers=False)
    answering = _start(container, worker, answers=True)
    assert message_pending(worker.queue, retrieval, 0)  # sent like an upload's job

    work_through(container, worker)
    job = container.jobs.get(T, retrieval)
    assert job is not None and (job.kind, job.status) == ("evaluation_run", "done"), job
    assert (job.progress_done, job.progress_total) == (2, 2)
    run = container.evaluation_runs.get(T, retrieval)
    assert run is not None and run.status == "done" and len(run.results) == 2
    assert run.summary["document_hit@1"] == 1.0, run.summary  # one document: it is first

    # The run that answers waits for the API process's runner, in the tenant's job list.
    waiting = container.jobs.get(T, answering)
    assert waiting is not None and waiting.status == "queued"
    listed = container.jobs.page(T, ["queued", "processing"], 10)
    assert [j.job_id for j in listed.records] == [answering] and listed.total == 1
    assert container.jobs.count_active(T) == 1


@pytest.mark.usefixtures("indexed")
def test_a_run_whose_worker_died_is_taken_again_and_finished(
    container: Container, worker: IngestWorker
) -> None:
    run_id = _start(container, worker, answers=False)
    claimed = container.jobs.claim_next(scope="worker")  # a worker that then dies
    assert claimed is not None and claimed.job_id == run_id
    container.evaluation_runs.started(run_id)

    assert worker.sweep(now=utc_now() + timedelta(seconds=5)).requeued == 1
    work_through(container, worker)
    run = container.evaluation_runs.get(T, run_id)
    assert run is not None and run.status == "done" and run.progress_done == 2, run
    job = container.jobs.get(T, run_id)
    assert job is not None and job.status == "done" and job.attempts == 2
