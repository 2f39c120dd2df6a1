"""Where an upload's trace waits for its job, on both carriers: in memory (the threads backend)
and in the local Redis (worker processes). What is remembered for a job is recalled once, by
whoever runs it; nothing else is."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
import redis

from app.jobs.trace_carriers import CARRIER_TTL_S, MemoryCarriers, RedisCarriers, TraceCarriers
from app.storage.redis_client import connect_redis

pytestmark = pytest.mark.integration

REDIS_TEST_URL = os.environ.get("RAG_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
TRACEPARENT = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
Carriers = Callable[[], TraceCarriers]  # a new view of the one store (another process's, in Redis)


@pytest.fixture(params=["memory", "redis"])
def carriers(request: pytest.FixtureRequest) -> Carriers:
    if request.param == "memory":
        kept = MemoryCarriers()
        return lambda: kept
    namespace = request.getfixturevalue("redis_namespace")
    return lambda: RedisCarriers(connect_redis(REDIS_TEST_URL), namespace.prefix)


def test_the_job_that_runs_gets_the_trace_of_the_request_that_queued_it(
    carriers: Carriers,
) -> None:
    api, worker = carriers(), carriers()
    api.remember("job_1", TRACEPARENT)
    api.remember("job_2", {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"})
    assert worker.recall("job_1") == TRACEPARENT
    assert worker.recall("job_1") == {}  # read once: a retried job does not join the old trace
    assert worker.recall("job_2")["traceparent"].startswith("00-111")


def test_nothing_is_kept_while_tracing_is_off(carriers: Carriers) -> None:
    kept = carriers()
    kept.remember("job_1", {})
    assert kept.recall("job_1") == {} and kept.recall("job_never_queued") == {}


def test_redis_keeps_a_carrier_a_day_and_an_unreachable_redis_costs_only_the_trace(
    redis_namespace: Any,
) -> None:
    RedisCarriers(connect_redis(REDIS_TEST_URL), redis_namespace.prefix).remember(
        "job_1", TRACEPARENT
    )
    ttl = redis_namespace.client.ttl(f"{redis_namespace.prefix}:trace:job_1")
    assert CARRIER_TTL_S - 60 <= ttl <= CARRIER_TTL_S
    away = RedisCarriers(connect_redis("redis://127.0.0.1:1/0"), "x")
    assert away.recall("job_1") == {}
    with pytest.raises(redis.RedisError):  # the queue around it suppresses this, see TracedQueue
        away.remember("job_1", TRACEPARENT)
