"""Sliding-window rate limits per key (a user id or a client IP), in memory or shared via Redis.

A hit is allowed when fewer than `limit` hits were allowed in the last minute (the window is a
constructor argument only so tests need not wait a minute). Refused hits are not counted, so a
client that waits `retry_after_s` gets in. The Redis backend keeps one sorted set of timestamps
per key, updated atomically by a script, so all API processes share the counts and the Redis
server's clock.

Beside the windows, two timed marks per key: `claim` lets one caller through per `hold_s`
seconds (pacing), `remember` notes a key for a while (a client known to an account); and a
count over a long fixed period (`count_up`, `tally`: an account's failed logins of the day),
one number per key where a one-minute log would hold an entry per hit for a day.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple, Protocol

import redis

from app.config import Settings
from app.errors import ProviderUnavailable
from app.storage.redis_client import connect_redis

WINDOW_S = 60.0


def query_rate_key(user_id: str) -> str:
    """The key of a user's RAG_RATE_LIMIT_QUERY_PER_MINUTE budget: their /query and /search
    requests, and the items of the evaluation runs they started."""
    return f"query:{user_id}"


class RateDecision(NamedTuple):
    """Whether a hit is allowed and, if not, how many seconds until the next one would be."""

    allowed: bool
    retry_after_s: float


class Tally(NamedTuple):
    """How many were counted in a key's current period, and in how many seconds it ends."""

    total: int
    ends_in_s: float


class RateLimiter(Protocol):
    """Counts hits per key over a sliding one-minute window."""

    def hit(self, key: str, limit_per_minute: int) -> RateDecision:
        """Record a hit if it is within the limit; say when to retry if not."""
        ...

    def peek(self, key: str, limit_per_minute: int) -> RateDecision:
        """What `hit` would decide now, without recording anything."""
        ...

    def reset(self, key: str) -> None:
        """Forget every hit of the key (a successful login clears its failures)."""
        ...

    def claim(self, key: str, hold_s: float) -> RateDecision:
        """Hold the key for `hold_s` seconds if nobody holds it; else say when it frees."""
        ...

    def remember(self, key: str, ttl_s: float) -> None:
        """Note the key for `ttl_s` seconds (noting it again restarts the time)."""
        ...

    def remembers(self, key: str) -> bool:
        """Whether the key was noted less than its `ttl_s` ago."""
        ...

    def count_up(self, key: str, period_s: float) -> int:
        """Count one more for the key and return its count; a period of `period_s` seconds
        starts with the first count and the count is forgotten when it ends."""
        ...

    def tally(self, key: str) -> Tally:
        """The key's count in its current period (0 when none runs), and when that ends."""
        ...


class MemoryRateLimiter:
    """A thread-safe sliding-window log per key; one process only."""

    # Forget idle keys now and then, so a scan over many client IPs cannot grow memory forever.
    _SWEEP_EVERY = 1000

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, window_s: float = WINDOW_S
    ) -> None:
        self._clock = clock
        self._window_s = window_s
        self._lock = threading.Lock()
        self._hits: dict[str, deque[float]] = {}
        self._until: dict[str, float] = {}  # claimed or remembered keys -> when that ends
        self._counts: dict[str, tuple[int, float]] = {}  # counted keys -> (count, period end)
        self._calls = 0

    def hit(self, key: str, limit_per_minute: int) -> RateDecision:
        """Record a hit if fewer than limit_per_minute were allowed in the last minute."""
        return self._decide(key, limit_per_minute, record=True)

    def peek(self, key: str, limit_per_minute: int) -> RateDecision:
        """What `hit` would decide now, without recording anything."""
        return self._decide(key, limit_per_minute, record=False)

    def reset(self, key: str) -> None:
        """Forget every hit of the key."""
        with self._lock:
            self._hits.pop(key, None)

    def claim(self, key: str, hold_s: float) -> RateDecision:
        """Hold the key for `hold_s` seconds if nobody holds it; else say when it frees."""
        now = self._clock()
        with self._lock:
            until = self._until.get(key, 0.0)
            if until > now:
                return RateDecision(False, max(until - now, 0.001))
            self._until[key] = now + hold_s
            return RateDecision(True, 0.0)

    def remember(self, key: str, ttl_s: float) -> None:
        """Note the key for `ttl_s` seconds."""
        with self._lock:
            self._until[key] = self._clock() + ttl_s

    def remembers(self, key: str) -> bool:
        """Whether the key was noted less than its `ttl_s` ago."""
        with self._lock:
            return self._until.get(key, 0.0) > self._clock()

    def count_up(self, key: str, period_s: float) -> int:
        """Count one more for the key in its period (one starts now if none runs)."""
        now = self._clock()
        with self._lock:
            count, ends = self._counts.get(key, (0, 0.0))
            if ends <= now:
                count, ends = 0, now + period_s
            self._counts[key] = (count + 1, ends)
            return count + 1

    def tally(self, key: str) -> Tally:
        """The key's count in its current period, and in how many seconds that ends."""
        now = self._clock()
        with self._lock:
            count, ends = self._counts.get(key, (0, 0.0))
            if ends <= now:
                return Tally(0, 0.0)
            return Tally(count, ends - now)

    def _decide(self, key: str, limit_per_minute: int, *, record: bool) -> RateDecision:
        if limit_per_minute <= 0:
            raise ValueError("limit_per_minute must be positive")
        now = self._clock()
        with self._lock:
            self._calls += 1
            if self._calls % self._SWEEP_EVERY == 0:
                self._sweep(now)
            window = self._hits.setdefault(key, deque())
            while window and window[0] <= now - self._window_s:
                window.popleft()
            if len(window) < limit_per_minute:
                if record:
                    window.append(now)
                return RateDecision(True, 0.0)
            # The hit that frees a slot is the one that was `limit` places back.
            oldest_counted = window[len(window) - limit_per_minute]
            return RateDecision(False, max(oldest_counted + self._window_s - now, 0.001))

    def _sweep(self, now: float) -> None:
        cutoff = now - self._window_s
        idle = [key for key, hits in self._hits.items() if not hits or hits[-1] <= cutoff]
        for key in idle:
            del self._hits[key]
        for key in [key for key, until in self._until.items() if until <= now]:
            del self._until[key]
        for key in [key for key, (_, ends) in self._counts.items() if ends <= now]:
            del self._counts[key]


_HIT_SCRIPT = """
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window_us = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_us - window_us)
local count = redis.call('ZCARD', KEYS[1])
if count < limit then
  if ARGV[4] == '1' then
    redis.call('ZADD', KEYS[1], now_us, now_us .. '-' .. ARGV[3])
    redis.call('PEXPIRE', KEYS[1], math.ceil(window_us / 1000))
  end
  return {1, 0}
end
local freeing = redis.call('ZRANGE', KEYS[1], count - limit, count - limit, 'WITHSCORES')
return {0, tonumber(freeing[2]) + window_us - now_us}
"""


# INCR, and the period's expiry set by the count that starts it (atomic: no count without one).
_COUNT_SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 or redis.call('PTTL', KEYS[1]) < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return count
"""


class RedisRateLimiter:
    """A sliding-window log per key in Redis, shared by every API process."""

    def __init__(
        self, client: redis.Redis[bytes], prefix: str = "rag", window_s: float = WINDOW_S
    ) -> None:
        self._client = client
        self._window_us = int(window_s * 1_000_000)
        self._prefix = f"{prefix}:ratelimit"
        self._hit = client.register_script(_HIT_SCRIPT)
        self._count = client.register_script(_COUNT_SCRIPT)

    def hit(self, key: str, limit_per_minute: int) -> RateDecision:
        """Record a hit if fewer than limit_per_minute were allowed in the last minute."""
        return self._decide(key, limit_per_minute, record=True)

    def peek(self, key: str, limit_per_minute: int) -> RateDecision:
        """What `hit` would decide now, without recording anything."""
        return self._decide(key, limit_per_minute, record=False)

    def reset(self, key: str) -> None:
        """Forget every hit of the key."""
        try:
            self._client.delete(f"{self._prefix}:{key}")
        except redis.RedisError as exc:
            raise ProviderUnavailable(f"rate limiter (Redis) unreachable: {exc}") from exc

    def claim(self, key: str, hold_s: float) -> RateDecision:
        """Hold the key for `hold_s` seconds if nobody holds it; else say when it frees."""
        name = f"{self._prefix}:{key}"
        try:
            if self._client.set(name, b"1", nx=True, px=_ms(hold_s)):
                return RateDecision(True, 0.0)
            left_ms = self._client.pttl(name)
        except redis.RedisError as exc:
            raise ProviderUnavailable(f"rate limiter (Redis) unreachable: {exc}") from exc
        # Expired between the two calls (-2): free now, so the caller may try again at once.
        return RateDecision(False, max(left_ms / 1000, 0.001))

    def remember(self, key: str, ttl_s: float) -> None:
        """Note the key for `ttl_s` seconds."""
        try:
            self._client.set(f"{self._prefix}:{key}", b"1", px=_ms(ttl_s))
        except redis.RedisError as exc:
            raise ProviderUnavailable(f"rate limiter (Redis) unreachable: {exc}") from exc

    def remembers(self, key: str) -> bool:
        """Whether the key was noted less than its `ttl_s` ago."""
        try:
            return bool(self._client.exists(f"{self._prefix}:{key}"))
        except redis.RedisError as exc:
            raise ProviderUnavailable(f"rate limiter (Redis) unreachable: {exc}") from exc

    def count_up(self, key: str, period_s: float) -> int:
        """Count one more for the key in its period (one starts now if none runs)."""
        try:
            return int(self._count(keys=[f"{self._prefix}:{key}"], args=[_ms(period_s)]))
        except redis.RedisError as exc:
            raise ProviderUnavailable(f"rate limiter (Redis) unreachable: {exc}") from exc

    def tally(self, key: str) -> Tally:
        """The key's count in its current period, and in how many seconds that ends."""
        name = f"{self._prefix}:{key}"
        try:
            with self._client.pipeline(transaction=True) as pipe:
                pipe.get(name)
                pipe.pttl(name)
                raw, left_ms = pipe.execute()
        except redis.RedisError as exc:
            raise ProviderUnavailable(f"rate limiter (Redis) unreachable: {exc}") from exc
        if raw is None or left_ms <= 0:
            return Tally(0, 0.0)
        return Tally(int(raw), left_ms / 1000)

    def _decide(self, key: str, limit_per_minute: int, *, record: bool) -> RateDecision:
        if limit_per_minute <= 0:
            raise ValueError("limit_per_minute must be positive")
        try:
            allowed, wait_us = self._hit(
                keys=[f"{self._prefix}:{key}"],
                args=[
                    self._window_us,
                    limit_per_minute,
                    secrets.token_hex(6),
                    "1" if record else "0",
                ],
            )
        except redis.RedisError as exc:
            raise ProviderUnavailable(f"rate limiter (Redis) unreachable: {exc}") from exc
        if allowed:
            return RateDecision(True, 0.0)
        return RateDecision(False, max(int(wait_us) / 1_000_000, 0.001))


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def retry_after_header(decision: RateDecision) -> str:
    """The `Retry-After` header value: whole seconds, rounded up, at least 1."""
    return str(max(1, math.ceil(decision.retry_after_s)))


def build_rate_limiter(settings: Settings) -> RateLimiter:
    """The limiter chosen by RAG_RATE_LIMIT_BACKEND (Redis when several API processes run)."""
    if settings.rate_limit_backend == "redis":
        client = connect_redis(settings.redis_url)
        return RedisRateLimiter(client, prefix=settings.redis_key_prefix)
    return MemoryRateLimiter()
