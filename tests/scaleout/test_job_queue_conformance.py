"""One behaviour suite for every job queue backend: what an upload's job goes through, from
`JobQueue.enqueue` to a finished job row, whichever backend runs it.

Each backend in `BACKENDS` gives the queue the API hands jobs to and a `drain` that lets its
workers run until the given jobs have ended: the `threads` pool runs them in this process; for
`redis`, an rq worker (built as `python -m app.worker` builds it) works through the messages.
A new backend is added by adding it to `BACKENDS`; what only one backend does (retries through
rq, the sweep, heartbeats) is tested in its own file.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app import worker as worker_module
from app.config import Settings
from app.container import Container
from app.job_runners.redis_tasks import rq_worker
from app.job_runners.redis_worker import IngestWorker
from app.jobs.queue import JobQueue, enqueue
from app.jobs.redis_queue import RedisJobQueue
from app.jobs.store import JobRecord
from app.storage.redis_client import connect_redis
from tests.scaleout.job_container import job_container, queued_upload

pytestmark = pytest.mark.integration

REDIS_URL = "redis://127.0.0.1:6379/0"
ENDED = ("done", "failed")


@dataclass
class QueueUnderTest:
    container: Container
    queue: JobQueue
    drain: Callable[[list[JobRecord]], None]  # run until these jobs have ended


def threads_backend(request: pytest.FixtureRequest, container: Container) -> QueueUnderTest:
    pool = container.job_queue  # the in-process pool RAG_JOB_BACKEND=threads builds
    pool.start()
    request.addfinalizer(pool.stop)

    def drain(jobs: list[JobRecord]) -> None:
        deadline = time.monotonic() + 120  # a bound for a stuck pool, not a speed target
        while not all(has_ended(container, job) for job in jobs):
            assert time.monotonic() < deadline, "the pool never finished the jobs"
            time.sleep(0.05)

    return QueueUnderTest(container, pool, drain)


def rq_backend(request: pytest.FixtureRequest, container: Container) -> QueueUnderTest:
    worker = IngestWorker(container.settings, container.ingest_deps, connect_redis(REDIS_URL))
    monkeypatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setattr(worker_module, "_current", worker)  # what `app.worker.main` sets

    def drain(jobs: list[JobRecord]) -> None:
        rq_worker(worker.queue, worker.queue.connection, "conformance").work(burst=True)

    return QueueUnderTest(container, RedisJobQueue(worker.queue, 60), drain)


Backend = Callable[[pytest.FixtureRequest, Container], QueueUnderTest]
BACKENDS = [pytest.param(threads_backend, id="threads"), pytest.param(rq_backend, id="rq")]


@pytest.fixture(params=BACKENDS)
def under_test(
    request: pytest.FixtureRequest, settings: Settings, redis_namespace: Any
) -> Iterator[QueueUnderTest]:
    backend: Backend = request.param
    with job_container(settings, redis_namespace) as container:
        yield backend(request, container)


def has_ended(container: Container, job: JobRecord) -> bool:
    current = container.jobs.get(job.tenant_id, job.job_id)
    return current is not None and current.status in ENDED


def submitted(
    under_test: QueueUnderTest, data_dir: Path, *uploads: tuple[str, str, bytes]
) -> list[JobRecord]:
    """Queue uploads (name, tenant, content) as the upload route does and hand them over."""
    container = under_test.container
    jobs = []
    for name, tenant, content in uploads:
        job_id = queued_upload(container, data_dir, name, tenant, content)
        job = container.jobs.get(tenant, job_id)
        assert job is not None and job.status in ("queued", "processing", "done")
        jobs.append(job)
    enqueue(under_test.queue, jobs)
    return jobs


def ended(under_test: QueueUnderTest, jobs: list[JobRecord]) -> list[JobRecord]:
    under_test.drain(jobs)
    rows = [under_test.container.jobs.get(job.tenant_id, job.job_id) for job in jobs]
    assert all(row is not None for row in rows)
    return [row for row in rows if row is not None]


VALVES = b"The relief valve is inspected every 30 days.\n\nReports go to the safety officer."
PUMPS = b"The pump is greased every 412 hours.\n\nUse the blue grease only."


def test_every_enqueued_job_is_run_to_done_once(under_test: QueueUnderTest, data_dir: Path) -> None:
    jobs = submitted(
        under_test,
        data_dir,
        ("valves.txt", "acme", VALVES),
        ("pumps.txt", "acme", PUMPS),
        ("other.txt", "globex", VALVES),
    )
    rows = ended(under_test, jobs)
    assert [row.status for row in rows] == ["done", "done", "done"]
    assert all(row.attempts == 1 and row.chunks_indexed >= 1 for row in rows)
    assert all(row.progress_done == row.progress_total == row.chunks_indexed for row in rows)
    corpus = under_test.container.corpus
    assert corpus.count("acme") == rows[0].chunks_indexed + rows[1].chunks_indexed
    assert corpus.count("globex") == rows[2].chunks_indexed


def test_a_job_handed_over_twice_runs_once(under_test: QueueUnderTest, data_dir: Path) -> None:
    (job,) = submitted(under_test, data_dir, ("valves.txt", "acme", VALVES))
    enqueue(under_test.queue, [job])  # a second delivery of the same job
    (row,) = ended(under_test, [job])
    assert row.status == "done" and row.attempts == 1
    assert under_test.container.corpus.count("acme") == row.chunks_indexed


def test_a_bad_file_fails_its_own_job_only(under_test: QueueUnderTest, data_dir: Path) -> None:
    jobs = submitted(
        under_test,
        data_dir,
        ("empty.txt", "acme", b"   \n"),
        ("valves.txt", "acme", VALVES),
    )
    bad, good = ended(under_test, jobs)
    assert bad.status == "failed"
    assert bad.error_code == "empty_document"
    assert good.status == "done" and good.chunks_indexed >= 1
    assert under_test.container.corpus.count("acme") == good.chunks_indexed
