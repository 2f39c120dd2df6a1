"""The Redis connection used by the answer cache and the rate limiter."""

from __future__ import annotations

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry


def connect_redis(url: str) -> redis.Redis[bytes]:
    """A client that fails within about a second when Redis is down.

    redis-py's default (10 retries with backoff) stalls every request for ~3 s during an outage;
    one quick retry still survives a Redis restart (a stale pooled connection).
    """
    client: redis.Redis[bytes] = redis.Redis.from_url(
        url,
        socket_timeout=2.0,
        socket_connect_timeout=1.0,
        retry=Retry(ExponentialBackoff(cap=0.05, base=0.01), retries=1),
        health_check_interval=30,
    )
    return client
