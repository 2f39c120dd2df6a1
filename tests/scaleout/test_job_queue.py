"""The Redis job queue and the worker's sweep, in one process against the local Redis and a real
job table (SQLite and PostgreSQL). The multi-process test covers the same paths end to end; these
cover the cases it cannot stage reliably: a lost message, a transient failure and its retry, a
message delivered twice, and a live job that must not be taken away.
"""

from __future__ import annotations

import json
import pickle
import threading
import time
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from rq import Queue
from rq.registry import ScheduledJobRegistry

from app.container import Container
from app.domain import QueueBacklog
from app.errors import ProviderUnavailable
from app.job_runners.redis_worker import TURN_POLL_S, IngestWorker, Swept
from app.jobs.redis_queue import RedisJobQueue, message_id, message_pending, retry_delay_s
from app.jobs.store import JobStore
from app.storage.db import Database, utc_now
from tests.queued_jobs import mark_done, queue_job
from tests.scaleout.job_container import queued_upload

pytestmark = pytest.mark.integration


def chroma_down_once(container: Container, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Chroma server refuses the next vector write (restarting), and takes the ones after."""
    real_upsert = container.vector_index.upsert
    calls = []

    def upsert(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise httpx.ConnectError("[Errno 111] Connection refused")
        real_upsert(*args, **kwargs)

    monkeypatch.setattr(container.vector_index, "upsert", upsert)


def test_retry_delays_grow_fourfold() -> None:
    assert [retry_delay_s(5.0, attempt) for attempt in (1, 2, 3)] == [5.0, 20.0, 80.0]


def test_an_upload_sent_while_redis_is_down_is_sent_again_by_a_worker_sweep(
    container: Container, worker: IngestWorker, data_dir: Path
) -> None:
    queued_at = utc_now()
    job_id = queued_upload(container, data_dir)
    down = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    RedisJobQueue(Queue("down", connection=down), 60).enqueue(container.jobs.get("acme", job_id))  # type: ignore[arg-type]

    queue = worker.queue
    assert not message_pending(queue, job_id, 0)
    # Within the API's grace period the API may still send it; after it, the sweep does.
    assert worker.sweep(now=queued_at) == Swept(requeued=0, resent=0)
    after_grace = utc_now() + timedelta(seconds=2 * container.settings.job_heartbeat_s + 0.05)
    assert worker.sweep(now=after_grace) == Swept(requeued=0, resent=1)
    assert message_pending(queue, job_id, 0)
    # A pending message is not sent twice.
    assert worker.sweep(now=after_grace) == Swept(requeued=0, resent=0)


def test_a_message_delivered_twice_runs_the_job_once(
    container: Container, worker: IngestWorker, data_dir: Path
) -> None:
    job_id = queued_upload(container, data_dir)
    assert worker.process(job_id) == f"finished {job_id}"
    first = container.jobs.get("acme", job_id)
    assert first is not None and first.status == "done" and first.chunks_indexed >= 1

    assert worker.process(job_id).startswith("skipped")
    again = container.jobs.get("acme", job_id)
    assert again is not None and again.attempts == 1 and again.updated_at == first.updated_at
    assert container.corpus.count("acme") == first.chunks_indexed


def test_a_transient_failure_is_retried_later_with_the_upload_kept(
    container: Container, worker: IngestWorker, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = queued_upload(container, data_dir)
    upload = Path(container.jobs.get("acme", job_id).stored_path)  # type: ignore[union-attr]
    chroma_down_once(container, monkeypatch)

    assert "retry in 30 s" in worker.process(job_id)
    waiting = container.jobs.get("acme", job_id)
    assert waiting is not None and waiting.status == "queued"
    assert waiting.progress_stage == "retrying" and "Connection refused" in (waiting.error or "")
    assert upload.exists()  # the retry needs the file
    scheduled = ScheduledJobRegistry(queue=worker.queue)
    assert message_id(job_id, 1) in scheduled.get_job_ids()
    delay = scheduled.get_scheduled_time(message_id(job_id, 1)).timestamp() - time.time()
    assert 20 < delay <= 30

    # What the scheduler delivers after the delay:
    assert worker.process(job_id) == f"finished {job_id}"
    done = container.jobs.get("acme", job_id)
    assert done is not None and done.status == "done" and done.error is None
    assert done.attempts == 2 and not upload.exists()


def test_a_retry_left_undelivered_by_a_dead_scheduler_is_sent_by_the_sweep(
    container: Container, worker: IngestWorker, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rq delivers a delayed retry through the scheduler of one worker (the holder of its lock);
    # when that worker dies, the others take the lock only at their next maintenance, up to
    # 10 minutes later. No scheduler runs here: the sweep must deliver the retry once it is due.
    job_id = queued_upload(container, data_dir)
    chroma_down_once(container, monkeypatch)
    assert "retry in 30 s" in worker.process(job_id)
    grace = 2 * container.settings.job_heartbeat_s

    # Before its time the retry waits for the scheduler, as sent.
    before_due = utc_now() + timedelta(seconds=20)
    assert worker.sweep(now=before_due) == Swept(requeued=0, resent=0)
    assert message_id(job_id, 1) in ScheduledJobRegistry(queue=worker.queue).get_job_ids()

    # Past its time and the grace, with nobody delivering it, the sweep puts it on the queue.
    overdue = utc_now() + timedelta(seconds=30 + grace + 1)
    assert worker.sweep(now=overdue) == Swept(requeued=0, resent=1)
    assert message_id(job_id, 1) in worker.queue.get_job_ids()
    assert message_id(job_id, 1) not in ScheduledJobRegistry(queue=worker.queue).get_job_ids()
    assert worker.sweep(now=overdue) == Swept(requeued=0, resent=0)  # sent once

    assert worker.process(job_id) == f"finished {job_id}"
    done = container.jobs.get("acme", job_id)
    assert done is not None and done.status == "done" and done.attempts == 2


def test_a_job_that_keeps_failing_transiently_fails_after_the_last_attempt(
    container: Container, worker: IngestWorker, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = queued_upload(container, data_dir)

    def down(*args: Any, **kwargs: Any) -> None:
        raise ProviderUnavailable("embedding server unreachable")

    monkeypatch.setattr(container.corpus, "replace_documents", down)
    for _ in range(container.settings.job_max_attempts - 1):
        assert "retry" in worker.process(job_id)
    assert worker.process(job_id) == f"finished {job_id}"
    failed = container.jobs.get("acme", job_id)
    assert failed is not None and failed.status == "failed"
    assert "embedding server unreachable" in (failed.error or "")
    assert failed.attempts == container.settings.job_max_attempts


def test_the_sweep_takes_back_a_dead_workers_job_but_not_a_live_one(
    container: Container, worker: IngestWorker, data_dir: Path
) -> None:
    dead = queued_upload(container, data_dir, "dead.txt")
    live = queued_upload(container, data_dir, "live.txt")
    assert container.jobs.claim(dead) is not None and container.jobs.claim(live) is not None
    settings = container.settings
    # The sweep looks at the job table as it will be once the stale limit has passed; the live
    # job's heartbeat is written then too (as its Heartbeat thread would), the dead one's not.
    later = utc_now() + timedelta(seconds=settings.job_stale_after_s + 0.2)
    container.jobs.heartbeat(live, now=later)
    # The requeued job is within the grace period at `later`.
    assert worker.sweep(now=later) == Swept(requeued=1, resent=0)
    assert container.jobs.get("acme", live).status == "processing"  # type: ignore[union-attr]
    mark_done(container.jobs, live, chunks_indexed=1, pages=1)
    assert container.jobs.get("acme", dead).status == "queued"  # type: ignore[union-attr]
    after_grace = later + timedelta(seconds=2 * settings.job_heartbeat_s + 0.05)
    # Sent once, as the message for attempt 2.
    assert worker.sweep(now=after_grace) == Swept(requeued=0, resent=1)
    assert message_pending(worker.queue, dead, 1)


def test_job_store_heartbeat_release_and_queued_since(sql_database: Database) -> None:
    jobs = JobStore(sql_database)
    job = queue_job(jobs, "acme", "doc_1", "a.txt", "/tmp/a", 10)
    assert not jobs.heartbeat(job.job_id)  # only a processing job has a heartbeat
    assert jobs.claim(job.job_id) is not None
    assert jobs.heartbeat(job.job_id)
    assert jobs.queued_since(0) == []
    jobs.release(job.job_id, "chroma unreachable")
    released = jobs.get("acme", job.job_id)
    assert released is not None and released.status == "queued" and released.attempts == 1
    # The reason is kept for operators, under the stable code the API shows instead.
    assert (released.error_code, released.error) == ("retrying", "chroma unreachable")
    assert jobs.queued_since(60) == []  # just released: inside the grace period
    time.sleep(0.01)
    assert jobs.queued_since(0) == [(job.job_id, 1)]


def test_messages_are_json_on_redis_and_a_worker_runs_them(
    container: Container, worker: IngestWorker, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app import worker as worker_module
    from app.job_runners.redis_tasks import rq_worker

    job_id = queued_upload(container, data_dir)
    RedisJobQueue(worker.queue, 60).enqueue(container.jobs.get("acme", job_id))  # type: ignore[arg-type]

    # What Redis holds for the message: zlib-compressed JSON naming the task and the job id,
    # not a pickle (which would start with the protocol byte 0x80 and could carry code).
    raw = worker.queue.connection.hget(f"rq:job:{message_id(job_id, 0)}", "data")
    assert raw is not None
    payload = zlib.decompress(raw)
    assert not payload.startswith(b"\x80")
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(payload)
    function, _instance, args, _kwargs = json.loads(payload)
    assert (function, args) == ("app.worker.process_job", [job_id])

    # An rq worker with the JSON serializer, as `python -m app.worker` builds it, runs it.
    monkeypatch.setattr(worker_module, "_current", worker)
    assert rq_worker(worker.queue, worker.queue.connection, "test-worker").work(burst=True)
    done = container.jobs.get("acme", job_id)
    assert done is not None and done.status == "done" and done.chunks_indexed >= 1


def test_a_message_is_a_turn_that_runs_the_fairest_job(
    container: Container, worker: IngestWorker, data_dir: Path
) -> None:
    # One job per turn (no batches), so the order of single jobs is exact.
    worker.settings = worker.settings.model_copy(update={"ingest_batch_jobs": 1})
    bulk = [queued_upload(container, data_dir, f"bulk{i}.txt") for i in range(3)]
    single = queued_upload(container, data_dir, "single.txt", tenant="solo")
    # rq delivers the messages first in, first out; the jobs run fairly across tenants.
    ran = [worker.process(message).removeprefix("finished ") for message in [*bulk, single]]
    assert ran == [bulk[0], single, bulk[1], bulk[2]]
    assert all(container.jobs.get("acme", job_id).status == "done" for job_id in bulk)  # type: ignore[union-attr]
    assert container.jobs.get("solo", single).status == "done"  # type: ignore[union-attr]


def test_a_turn_waits_while_every_waiting_tenant_is_at_its_running_limit(
    container: Container, worker: IngestWorker, data_dir: Path
) -> None:
    worker.settings = worker.settings.model_copy(update={"max_running_jobs_per_tenant": 1})
    first = queued_upload(container, data_dir, "one.txt")
    second = queued_upload(container, data_dir, "two.txt")
    assert container.jobs.claim(first) is not None  # another worker is running the first
    outcome: list[str] = []
    turn = threading.Thread(target=lambda: outcome.append(worker.process(second)))
    turn.start()
    turn.join(3 * TURN_POLL_S)
    # The turn is kept, not dropped: the tenant may run one job at a time.
    assert turn.is_alive() and outcome == []
    assert container.jobs.get("acme", second).status == "queued"  # type: ignore[union-attr]
    mark_done(container.jobs, first, chunks_indexed=1, pages=1)
    turn.join(30)
    assert outcome == [f"finished {second}"]


def test_a_turn_runs_a_batch_of_one_tenants_small_jobs_and_later_turns_find_them_done(
    container: Container, worker: IngestWorker, data_dir: Path
) -> None:
    bulk = [queued_upload(container, data_dir, f"bulk{i}.txt") for i in range(3)]
    single = queued_upload(container, data_dir, "single.txt", tenant="solo")
    ran = [worker.process(message) for message in [*bulk, single]]
    assert ran[0] == "; ".join(f"finished {job_id}" for job_id in bulk)
    assert ran[1] == f"finished {single}"
    assert all(outcome.startswith("skipped") for outcome in ran[2:])
    for job_id in bulk:
        done = container.jobs.get("acme", job_id)
        assert done is not None and done.status == "done" and done.attempts == 1
        assert done.progress_done == done.progress_total == done.chunks_indexed >= 1
    assert worker.sweep() == Swept(requeued=0, resent=0)  # nothing queued lacks a message


def test_a_transient_failure_in_a_batch_puts_back_each_job_with_its_own_retry(
    container: Container, worker: IngestWorker, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [queued_upload(container, data_dir, f"part{i}.txt") for i in range(2)]

    def down(*args: Any, **kwargs: Any) -> None:
        raise httpx.ConnectError("[Errno 111] Connection refused")

    monkeypatch.setattr(container.vector_index, "upsert", down)
    outcome = worker.process(ids[0])
    assert outcome.count("retry in 30 s") == 2, outcome
    scheduled = ScheduledJobRegistry(queue=worker.queue).get_job_ids()
    for job_id in ids:
        waiting = container.jobs.get("acme", job_id)
        assert waiting is not None and waiting.status == "queued"
        assert waiting.progress_stage == "retrying"
        assert Path(waiting.stored_path).exists()
        assert message_id(job_id, 1) in scheduled
    monkeypatch.undo()
    # Each retry message claims its own job.
    assert [worker.process(job_id) for job_id in ids] == [f"finished {i}" for i in ids]


def test_queued_summary_counts_waiting_jobs_and_the_oldest_wait(sql_database: Database) -> None:
    jobs = JobStore(sql_database)
    assert jobs.queued_summary() == QueueBacklog(queued=0, oldest_wait_s=0.0)
    first = queue_job(jobs, "acme", "doc_1", "a.txt", "/tmp/a", 10)
    time.sleep(0.01)  # two distinct queueing times
    second = queue_job(jobs, "globex", "doc_2", "b.txt", "/tmp/b", 10)

    def queued_at(tenant: str, job_id: str) -> datetime:
        record = jobs.get(tenant, job_id)
        assert record is not None
        stamp = record.updated_at
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)  # SQLite: naive UTC

    later = queued_at("globex", second.job_id) + timedelta(seconds=5)
    backlog = jobs.queued_summary(now=later)
    # The first job's wait, not the second's.
    assert backlog.queued == 2
    waited = (later - queued_at("acme", first.job_id)).total_seconds()
    assert backlog.oldest_wait_s == pytest.approx(waited)
    assert jobs.claim(first.job_id) is not None  # a running job no longer waits
    backlog = jobs.queued_summary(now=later)
    assert backlog.queued == 1 and backlog.oldest_wait_s == pytest.approx(5.0)
