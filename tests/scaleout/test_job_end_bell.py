"""A client waiting on `GET /jobs/{id}?wait=` in an API process hears of its job's end when a
worker process records it, through the local Redis; and a Redis outage costs the announcement
only, never the job's end."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from app.config import Settings
from app.container import Container
from app.jobs.ending_bell import RedisEndingBell
from app.jobs.store import JobRecord
from app.services.job_wait import wait_for_job
from testkit.local_stack import REDIS_URL
from testkit.waiting import wait_until
from tests.queued_jobs import jobs_watched, mark_done, queue_job

pytestmark = pytest.mark.integration


@pytest.fixture
def processes(settings: Settings, redis_namespace: Any) -> Iterator[tuple[Container, Container]]:
    """Two containers on one job table and one Redis prefix, as an API process and a worker
    process of the `redis` backend build them (no vector store is touched)."""
    scaled = settings.model_copy(
        update={
            "job_backend": "redis",
            "vector_backend": "chroma-http",
            "redis_key_prefix": redis_namespace.prefix,
        }
    )
    api, worker = Container(scaled), Container(scaled)
    api.job_queue.start()  # the API process listens from its start
    try:
        yield api, worker
    finally:
        api.job_queue.stop()


def wait_in_thread(api: Container, job_id: str, result: list[JobRecord]) -> threading.Thread:
    """`GET /jobs/{id}?wait=20`'s wait, reading the table again only after a minute: an end that
    is not heard is seen only when the wait runs out."""

    def run() -> None:
        wait = wait_for_job(
            api.upload_deps, tenant_id="acme", job_id=job_id, wait_s=20, recheck_s=60
        )
        result.append(asyncio.run(wait))

    waiter = threading.Thread(target=run)
    waiter.start()
    return waiter


def test_a_job_ended_by_a_worker_process_wakes_its_waiter_in_the_api_process(
    processes: tuple[Container, Container],
) -> None:
    api, worker = processes
    job = queue_job(api.jobs, "acme", "doc-1", "valves.txt", "/nowhere", 10)
    result: list[JobRecord] = []
    waiter = wait_in_thread(api, job.job_id, result)
    while not jobs_watched(api.jobs.endings):  # the client is waiting
        threading.Event().wait(0.01)

    mark_done(worker.jobs, job.job_id)  # the worker process's own job store

    waiter.join(timeout=10)
    assert not waiter.is_alive(), "the waiter did not hear the job's end"
    assert [found.status for found in result] == ["done"]
    assert jobs_watched(api.jobs.endings) == 0


def test_a_job_ended_while_redis_is_down_still_ends_and_the_failure_is_logged(
    processes: tuple[Container, Container], caplog: pytest.LogCaptureFixture
) -> None:
    api, worker = processes
    job = queue_job(api.jobs, "acme", "doc-1", "valves.txt", "/nowhere", 10)
    down = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    worker.jobs.endings.announce = RedisEndingBell(down, "nobody-listens").announce

    with caplog.at_level(logging.WARNING, logger="app.jobs.ending_bell"):
        mark_done(worker.jobs, job.job_id)

    ended = api.jobs.get("acme", job.job_id)
    assert ended is not None and ended.status == "done"
    assert "could not announce the end of 1 job(s)" in caplog.text


def test_the_listener_hears_again_after_its_connection_is_cut(redis_namespace: Any) -> None:
    name = f"{redis_namespace.prefix}-bell"
    listening: redis.Redis[bytes] = redis.Redis.from_url(REDIS_URL, client_name=name)
    channel = f"{redis_namespace.prefix}:ended"
    bell, heard = RedisEndingBell(listening, channel), list[str]()
    announcer = RedisEndingBell(redis_namespace.client, channel)
    bell.listen(heard.extend)
    try:
        announcer.announce(["job-1"])
        assert wait_until(lambda: heard == ["job-1"])
        for client in redis_namespace.client.client_list(_type="pubsub"):
            if client["name"] == name:  # as a Redis restart or a network cut would
                redis_namespace.client.client_kill_filter(_id=client["id"])
        # Announcements made while it is away are lost (waiters read the table instead); once
        # it has subscribed again, it hears them.

        def announced_and_heard() -> bool:
            announcer.announce(["job-2"])
            return "job-2" in heard

        assert wait_until(announced_and_heard)
    finally:
        bell.stop()
        listening.close()
