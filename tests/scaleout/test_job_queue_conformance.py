"""One behaviour suite for every job queue backend: what an upload's job goes through, from
`JobQueue.enqueue` to a finished job row, whichever backend runs it.

Each backend in `BACKENDS` gives the queue the API hands jobs to and a `drain` that lets its
workers run until the given jobs have ended: the `threads` pool runs them in this process
(started by the first drain, so a test can act on a job before any worker sees it); for
`redis`, an rq worker (built as `python -m app.worker` builds it) works through the messages.
The suite covers a job run to done, a job handed over twice, progress a client sees while it
runs, a bad file failing with its code, a server down during a job (each backend says whether
it retries), and a document deleted while its job waits. A new backend is added by adding it
to `BACKENDS`; what only one backend does (rq's delayed retries, the sweep, heartbeats) is
tested in its own file.
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
from app.errors import ProviderUnavailable
from app.job_runners.redis_tasks import rq_worker
from app.jobs.queue import JobQueue, enqueue
from app.jobs.redis_queue import RedisJobQueue
from app.jobs.store import JobRecord
from app.services.documents import delete_document
from testkit.builders import corrupt_pdf, encrypted_pdf
from tests.scaleout.job_container import ingest_worker, job_container, queued_upload

pytestmark = pytest.mark.integration

ENDED = ("done", "failed")


@dataclass
class QueueUnderTest:
    container: Container
    queue: JobQueue
    drain: Callable[[list[JobRecord]], None]  # run until these jobs have ended
    # Whether a job whose server was unreachable is put back and run again (rq, up to
    # RAG_JOB_MAX_ATTEMPTS), or fails at once with the provider's code (the in-process pool).
    retries_transient_failures: bool


def threads_backend(request: pytest.FixtureRequest, container: Container) -> QueueUnderTest:
    pool = container.job_queue  # the in-process pool RAG_JOB_BACKEND=threads builds
    request.addfinalizer(pool.stop)
    started: list[bool] = []

    def drain(jobs: list[JobRecord]) -> None:
        if not started:
            pool.start()  # the threads claim what is queued at once
            started.append(True)
        deadline = time.monotonic() + 120  # a bound for a stuck pool, not a speed target
        while not all(has_ended(container, job) for job in jobs):
            assert time.monotonic() < deadline, "the pool never finished the jobs"
            time.sleep(0.05)

    return QueueUnderTest(container, pool, drain, retries_transient_failures=False)


def rq_backend(request: pytest.FixtureRequest, container: Container) -> QueueUnderTest:
    worker = ingest_worker(container)
    monkeypatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setattr(worker_module, "_current", worker)  # what `app.worker.main` sets

    def drain(jobs: list[JobRecord]) -> None:
        # Burst: until the queue is empty, retries sent meanwhile included (no delay here).
        rq_worker(worker.queue, worker.queue.connection, "conformance").work(burst=True)

    return QueueUnderTest(
        container, RedisJobQueue(worker.queue, 60), drain, retries_transient_failures=True
    )


Backend = Callable[[pytest.FixtureRequest, Container], QueueUnderTest]
BACKENDS = [pytest.param(threads_backend, id="threads"), pytest.param(rq_backend, id="rq")]


@pytest.fixture(params=BACKENDS)
def under_test(
    request: pytest.FixtureRequest, settings: Settings, redis_namespace: Any
) -> Iterator[QueueUnderTest]:
    backend: Backend = request.param
    # A retry is sent at once (its backoff is rq's own test), so a drain sees it run.
    with job_container(settings, redis_namespace, job_retry_base_s=0.0) as container:
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


def test_bad_files_fail_their_own_jobs_with_their_codes(
    under_test: QueueUnderTest, data_dir: Path
) -> None:
    jobs = submitted(
        under_test,
        data_dir,
        ("empty.txt", "acme", b"   \n"),
        ("broken.pdf", "acme", corrupt_pdf()),
        ("locked.pdf", "acme", encrypted_pdf()),
        ("valves.txt", "acme", VALVES),
    )
    *bad, good = ended(under_test, jobs)
    assert [(row.status, row.error_code) for row in bad] == [
        ("failed", "empty_document"),
        ("failed", "corrupt_document"),
        ("failed", "encrypted_document"),
    ]
    assert all(row.error for row in bad)  # the detail operators read beside the code
    container = under_test.container
    assert [container.documents.get("acme", row.document_id).status for row in bad] == [  # type: ignore[union-attr]
        "failed"
    ] * 3
    assert not any(Path(row.stored_path).exists() for row in bad)  # no upload left behind
    assert good.status == "done" and good.chunks_indexed >= 1
    assert container.corpus.count("acme") == good.chunks_indexed


def test_a_running_job_shows_its_progress_and_ends_complete(
    under_test: QueueUnderTest, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    container = under_test.container
    seen: list[JobRecord | None] = []
    embed = container.embedder.embed_documents

    def embed_and_look(texts: list[str]) -> list[list[float]]:
        # What GET /jobs/{id} reads each time the worker embeds a batch of the job's chunks.
        seen.append(container.jobs.get("acme", job_id))
        return embed(texts)

    monkeypatch.setattr(container.embedder, "embed_documents", embed_and_look)
    # More chunks than one embedding call takes (RAG_EMBEDDING_BATCH_SIZE), so progress moves.
    lines = [
        f"Valve {i} is inspected every {i % 90 + 7} days by the shift lead." for i in range(900)
    ]
    text = "\n\n".join(lines).encode()
    job_id = queued_upload(container, data_dir, "valves.txt", "acme", text)
    job = container.jobs.get("acme", job_id)
    assert job is not None and job.status == "queued" and job.progress_done == 0
    enqueue(under_test.queue, [job])
    (row,) = ended(under_test, [job])
    assert row.status == "done" and row.progress_done == row.progress_total == row.chunks_indexed
    assert row.chunks_indexed > container.settings.embedding_batch_size
    assert len(seen) >= 2
    during = seen[-1]  # before the last embedding call: some chunks done, some not
    assert during is not None and during.status == "processing" and during.attempts == 1
    assert during.progress_stage == "embedding"
    assert 0 < during.progress_done < during.progress_total == row.chunks_indexed


def test_a_server_down_during_a_job_retries_it_or_fails_it_with_the_providers_code(
    under_test: QueueUnderTest, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    container = under_test.container
    embed = container.embedder.embed_documents
    calls: list[int] = []

    def down_once(texts: list[str]) -> list[list[float]]:
        calls.append(len(texts))
        if len(calls) == 1:
            raise ProviderUnavailable("embedding server unreachable")
        return embed(texts)

    monkeypatch.setattr(container.embedder, "embed_documents", down_once)
    (job,) = submitted(under_test, data_dir, ("valves.txt", "acme", VALVES))
    (row,) = ended(under_test, [job])
    if under_test.retries_transient_failures:
        assert (row.status, row.attempts, row.error_code) == ("done", 2, None)
        assert container.corpus.count("acme") == row.chunks_indexed >= 1
    else:
        assert (row.status, row.attempts, row.error_code) == ("failed", 1, "provider_unavailable")
        assert "embedding server unreachable" in (row.error or "")
        assert container.corpus.count("acme") == 0
    assert not Path(row.stored_path).exists()  # ended either way: the upload is gone


def test_a_document_deleted_while_its_job_waits_stays_deleted(
    under_test: QueueUnderTest, data_dir: Path
) -> None:
    container = under_test.container
    job_id = queued_upload(container, data_dir, "valves.txt", "acme", VALVES)
    job = container.jobs.get("acme", job_id)
    assert job is not None
    delete_document(container.document_deps, tenant_id="acme", document_id=job.document_id)
    enqueue(under_test.queue, [job])
    (row,) = ended(under_test, [job])
    assert (row.status, row.error_code) == ("failed", "ingestion_failed")
    assert "deleted before it could be indexed" in (row.error or "")
    assert container.documents.get("acme", job.document_id) is None
    assert container.corpus.count("acme") == 0
    assert not Path(row.stored_path).exists()
