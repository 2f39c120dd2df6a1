"""The answer cache: a small interface, an in-process LRU and a shared Redis backend.

A key is built from the tenant, the normalised question, `k`, the tenant's corpus version and a
fingerprint of every answer-shaping setting (`app.answer_shape.AnswerShape`), so an answer is
never served to another tenant, after the documents it came from changed, or from another
configuration. Values are JSON objects.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import redis

from app.answer_shape import answer_shape, shape_fingerprint
from app.config import Settings
from app.errors import ProviderUnavailable
from app.storage.redis_client import connect_redis

log = logging.getLogger(__name__)

KEY_SCHEME = "answer-v1"


@dataclass(frozen=True)
class CacheKey:
    """Where an answer is cached: always within one tenant's namespace."""

    tenant_id: str
    digest: str


@dataclass(frozen=True)
class CacheStats:
    """Per-tenant cache figures for `/stats`."""

    entries: int
    hits: int
    misses: int

    @property
    def hit_rate(self) -> float:
        """Hits over lookups, 0.0 before the first lookup."""
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0


class AnswerCache(Protocol):
    """Cached answers (JSON objects) by key, invalidated per tenant."""

    def get(self, key: CacheKey) -> dict[str, Any] | None:
        """The cached value, or None (counted as a miss)."""
        ...

    def set(self, key: CacheKey, value: Mapping[str, Any], ttl_s: int | None = None) -> None:
        """Store a value for ttl_s seconds (the configured TTL when None)."""
        ...

    def invalidate_tenant(self, tenant_id: str) -> None:
        """Drop every entry of the tenant, in every process."""
        ...

    def stats(self, tenant_id: str) -> CacheStats:
        """Live entries, hits and misses of the tenant."""
        ...


def normalise_question(question: str) -> str:
    """NFC, whitespace collapsed to single spaces, trimmed and case-folded."""
    text = " ".join(unicodedata.normalize("NFC", question).split())
    # Case folding can produce decomposed sequences; compose again so equal text hashes equal.
    return unicodedata.normalize("NFC", text.casefold())


def config_fingerprint(settings: Settings) -> str:
    """A short hash of every setting that shapes an answer (see `app.answer_shape`)."""
    return shape_fingerprint(answer_shape(settings))


def answer_cache_key(
    tenant_id: str,
    question: str,
    *,
    k: int,
    corpus_version: int | str,
    config_fingerprint: str,
    scope_key: str = "all",
) -> CacheKey:
    """The cache key of a question asked by a tenant against its current corpus, within a
    search scope (`scope_key`: the collections and filters that decide what retrieval sees,
    never the user; "all" for the whole tenant, which keeps the key it had before scopes)."""
    digest = hashlib.sha256()
    parts = [
        KEY_SCHEME,
        tenant_id,
        normalise_question(question),
        str(k),
        str(corpus_version),
        config_fingerprint,
    ]
    if scope_key != "all":
        parts.append("scope:" + scope_key)
    for part in parts:
        digest.update(part.encode("utf-8"))
        digest.update(b"\x00")
    return CacheKey(tenant_id=tenant_id, digest=digest.hexdigest())


def _encode(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass
class _Entry:
    payload: str
    expires_at: float


class MemoryAnswerCache:
    """A thread-safe in-process LRU with a TTL; one process only."""

    def __init__(
        self, max_entries: int, ttl_s: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if max_entries <= 0 or ttl_s <= 0:
            raise ValueError("max_entries and ttl_s must be positive")
        self._max_entries = max_entries
        self._ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[CacheKey, _Entry] = OrderedDict()
        self._by_tenant: dict[str, set[CacheKey]] = {}
        self._hits: dict[str, int] = {}
        self._misses: dict[str, int] = {}

    def get(self, key: CacheKey) -> dict[str, Any] | None:
        """The cached value, or None when absent or expired."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.expires_at <= self._clock():
                self._remove(key)
                entry = None
            if entry is None:
                self._misses[key.tenant_id] = self._misses.get(key.tenant_id, 0) + 1
                return None
            self._entries.move_to_end(key)
            self._hits[key.tenant_id] = self._hits.get(key.tenant_id, 0) + 1
            payload = entry.payload
        # Decoded per call, so a caller mutating its copy cannot change the cached answer.
        result: dict[str, Any] = json.loads(payload)
        return result

    def set(self, key: CacheKey, value: Mapping[str, Any], ttl_s: int | None = None) -> None:
        """Store a value, evicting the least recently used entries beyond max_entries."""
        payload = _encode(value)
        expires_at = self._clock() + (ttl_s or self._ttl_s)
        with self._lock:
            self._entries[key] = _Entry(payload, expires_at)
            self._entries.move_to_end(key)
            self._by_tenant.setdefault(key.tenant_id, set()).add(key)
            while len(self._entries) > self._max_entries:
                oldest = next(iter(self._entries))
                self._remove(oldest)

    def invalidate_tenant(self, tenant_id: str) -> None:
        """Drop every entry of the tenant."""
        with self._lock:
            for key in list(self._by_tenant.get(tenant_id, ())):
                self._remove(key)

    def stats(self, tenant_id: str) -> CacheStats:
        """Unexpired entries, hits and misses of the tenant."""
        now = self._clock()
        with self._lock:
            keys = self._by_tenant.get(tenant_id, set())
            live = sum(1 for key in keys if self._entries[key].expires_at > now)
            return CacheStats(
                entries=live,
                hits=self._hits.get(tenant_id, 0),
                misses=self._misses.get(tenant_id, 0),
            )

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _remove(self, key: CacheKey) -> None:
        self._entries.pop(key, None)
        keys = self._by_tenant.get(key.tenant_id)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_tenant[key.tenant_id]


# Every script touches only keys of one tenant (one `{tenant}` hash tag) and reads the clock of
# the Redis server, so all API processes agree on expiry.
_GET_SCRIPT = """
local gen = redis.call('GET', KEYS[1]) or '0'
local value = redis.call('GET', ARGV[1] .. gen .. ':' .. ARGV[2])
if value then redis.call('INCR', KEYS[2]) else redis.call('INCR', KEYS[3]) end
return value
"""

_SET_SCRIPT = """
local gen = redis.call('GET', KEYS[1]) or '0'
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl_ms = tonumber(ARGV[4])
local index = ARGV[3] .. gen
redis.call('SET', ARGV[1] .. gen .. ':' .. ARGV[2], ARGV[5], 'PX', ttl_ms)
redis.call('ZREMRANGEBYSCORE', index, '-inf', now_ms)
redis.call('ZADD', index, now_ms + ttl_ms, ARGV[2])
local excess = redis.call('ZCARD', index) - tonumber(ARGV[6])
if excess > 0 then
  local evicted = redis.call('ZPOPMIN', index, excess)
  for i = 1, #evicted, 2 do redis.call('DEL', ARGV[1] .. gen .. ':' .. evicted[i]) end
end
-- The index lives as long as its longest-lived entry: a short entry set after longer ones
-- must not expire the index (and with it the bound and the count) before them.
local last = redis.call('ZRANGE', index, -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', index, tonumber(last[2]))
return 1
"""

_INVALIDATE_SCRIPT = """
local gen = redis.call('GET', KEYS[1]) or '0'
redis.call('INCR', KEYS[1])
local index = ARGV[2] .. gen
for _, digest in ipairs(redis.call('ZRANGE', index, 0, -1)) do
  redis.call('DEL', ARGV[1] .. gen .. ':' .. digest)
end
redis.call('DEL', index)
return 1
"""

_STATS_SCRIPT = """
local gen = redis.call('GET', KEYS[1]) or '0'
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local index = ARGV[1] .. gen
redis.call('ZREMRANGEBYSCORE', index, '-inf', now_ms)
return {redis.call('ZCARD', index), tonumber(redis.call('GET', KEYS[2]) or '0'),
        tonumber(redis.call('GET', KEYS[3]) or '0')}
"""


class RedisAnswerCache:
    """Answers in Redis, shared by every API process.

    Invalidation bumps a per-tenant generation counter that is part of every entry's key, so
    all processes stop seeing old entries at once; the old entries are also deleted. A Redis
    outage degrades `get`/`set` to misses (logged) rather than failing queries.
    """

    def __init__(
        self, client: redis.Redis[bytes], ttl_s: int, max_entries: int, prefix: str = "rag"
    ) -> None:
        self._client = client
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._prefix = f"{prefix}:cache"
        self._get = client.register_script(_GET_SCRIPT)
        self._set = client.register_script(_SET_SCRIPT)
        self._invalidate = client.register_script(_INVALIDATE_SCRIPT)
        self._stats = client.register_script(_STATS_SCRIPT)

    def _base(self, tenant_id: str) -> str:
        return f"{self._prefix}:{{{tenant_id}}}"

    def _counters(self, tenant_id: str) -> list[str]:
        base = self._base(tenant_id)
        return [f"{base}:gen", f"{base}:hits", f"{base}:misses"]

    def get(self, key: CacheKey) -> dict[str, Any] | None:
        """The cached value, or None when absent, expired, invalidated or Redis is down."""
        base = self._base(key.tenant_id)
        try:
            raw = self._get(keys=self._counters(key.tenant_id), args=[f"{base}:a:", key.digest])
        except redis.RedisError as exc:
            log.warning("answer cache unavailable, treating as a miss: %s", exc)
            return None
        if raw is None:
            return None
        result: dict[str, Any] = json.loads(raw)
        return result

    def set(self, key: CacheKey, value: Mapping[str, Any], ttl_s: int | None = None) -> None:
        """Store a value; at most max_entries live entries per tenant (oldest evicted)."""
        base = self._base(key.tenant_id)
        ttl_ms = int((ttl_s or self._ttl_s) * 1000)
        args = [f"{base}:a:", key.digest, f"{base}:index:", ttl_ms, _encode(value)]
        try:
            self._set(keys=self._counters(key.tenant_id), args=[*args, self._max_entries])
        except redis.RedisError as exc:
            log.warning("answer cache unavailable, answer not cached: %s", exc)

    def invalidate_tenant(self, tenant_id: str) -> None:
        """Drop every entry of the tenant for all processes; raises if Redis is unreachable."""
        base = self._base(tenant_id)
        try:
            self._invalidate(keys=self._counters(tenant_id), args=[f"{base}:a:", f"{base}:index:"])
        except redis.RedisError as exc:
            raise ProviderUnavailable(f"answer cache (Redis) unreachable: {exc}") from exc

    def stats(self, tenant_id: str) -> CacheStats:
        """Live entries, hits and misses of the tenant, across processes."""
        try:
            entries, hits, misses = self._stats(
                keys=self._counters(tenant_id), args=[f"{self._base(tenant_id)}:index:"]
            )
        except redis.RedisError as exc:
            raise ProviderUnavailable(f"answer cache (Redis) unreachable: {exc}") from exc
        return CacheStats(entries=int(entries), hits=int(hits), misses=int(misses))


def build_cache(settings: Settings) -> AnswerCache:
    """The answer cache chosen by RAG_CACHE_BACKEND."""
    if settings.cache_backend == "redis":
        client = connect_redis(settings.redis_url)
        return RedisAnswerCache(
            client, settings.cache_ttl_s, settings.cache_max_entries, settings.redis_key_prefix
        )
    return MemoryAnswerCache(settings.cache_max_entries, settings.cache_ttl_s)
