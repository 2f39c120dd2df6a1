"""Per-process memory: the resident size, giving freed heap back to the OS, and a bounded LRU.

Why this exists (bench/README.md "Many tenants"): a small tenant cost ~2.7 MB of
resident memory per process, almost all of it in Chroma's native HNSW cache, and what such a
cache frees stays in glibc's arenas unless `malloc_trim` hands it back. `HotMap` bounds the
per-tenant structures the service itself holds (and, by weight, its caches of vectors and
pictures); `MemoryBudget` trims after they evict.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


def resident_mb() -> float:
    """Resident set size of this process in MB (Linux; 0.0 where /proc is absent)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * 4096 / 2**20
    except OSError:
        return 0.0


def _load_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return libc.malloc_trim if libc is not None else None  # type: ignore[no-any-return]
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None


_TRIM = _load_trim()


def return_freed_memory() -> bool:
    """Give the heap pages glibc keeps after frees back to the OS; False where unsupported."""
    return _TRIM is not None and bool(_TRIM(0))


class MemoryBudget:
    """After an eviction, trims the heap when the process is above `budget_mb` (0: always),
    at most once per `min_interval_s` (a trim walks the whole heap: ~1-10 ms)."""

    def __init__(
        self,
        budget_mb: int,
        min_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        resident: Callable[[], float] = resident_mb,
    ) -> None:
        self.budget_mb = budget_mb
        self._min_interval_s = min_interval_s
        self._clock = clock
        self._resident = resident
        self._last_trim = float("-inf")
        self._guard = threading.Lock()
        self.trims = 0

    def over(self) -> bool:
        """Whether the process holds more than the budget (never, without one)."""
        return self.budget_mb > 0 and self._resident() > self.budget_mb

    def after_eviction(self) -> None:
        """Trim now if over budget (or without a budget) and no trim ran just before."""
        if self.budget_mb > 0 and not self.over():
            return
        with self._guard:
            now = self._clock()
            if now - self._last_trim < self._min_interval_s:
                return
            self._last_trim = now
        return_freed_memory()
        self.trims += 1


class HotMap(Generic[K, V]):
    """A thread-safe mapping that keeps the most recently used entries within `bound`: that many
    entries or, given `weight`, entries that weigh that much in all (one heavier than the whole
    bound is not kept; a bound of 0 keeps nothing). Each evicted entry is handed to `on_evict`
    (outside the lock)."""

    def __init__(
        self,
        bound: int,
        on_evict: Callable[[K, V], None] | None = None,
        weight: Callable[[V], int] | None = None,
    ) -> None:
        if bound < 1 and weight is None:
            raise ValueError("bound must be at least 1")
        self.bound = bound
        self._on_evict = on_evict
        self._weight = weight or _one
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._guard = threading.Lock()
        self.evictions = 0
        self.held = 0  # the weight of the entries held (without `weight`: how many)

    def get(self, key: K) -> V | None:
        """The entry, now the most recently used; None when absent."""
        with self._guard:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        """Hold the entry as the most recently used, evicting beyond the bound."""
        weight = self._weight(value)
        if weight > self.bound:
            return
        evicted: list[tuple[K, V]] = []
        with self._guard:
            self._forget(key)
            self._entries[key] = value
            self.held += weight
            while self.held > self.bound:
                old_key, old_value = self._entries.popitem(last=False)
                self.held -= self._weight(old_value)
                evicted.append((old_key, old_value))
                self.evictions += 1
        if self._on_evict is not None:
            for old_key, old_value in evicted:
                self._on_evict(old_key, old_value)

    def pop(self, key: K) -> V | None:
        """Forget the entry (not counted as an eviction)."""
        with self._guard:
            return self._forget(key)

    def pop_where(self, which: Callable[[K, V], bool]) -> None:
        """Forget every entry `which` picks (not counted as evictions)."""
        with self._guard:
            for key in [key for key, value in self._entries.items() if which(key, value)]:
                self._forget(key)

    def newest(self, which: Callable[[K, V], bool]) -> tuple[K, V] | None:
        """The most recently used entry `which` picks, leaving the order as it is."""
        with self._guard:
            for key in reversed(self._entries):
                value = self._entries[key]
                if which(key, value):
                    return key, value
        return None

    def keys(self) -> list[K]:
        """The held keys, least recently used first."""
        with self._guard:
            return list(self._entries)

    def __len__(self) -> int:
        with self._guard:
            return len(self._entries)

    def _forget(self, key: K) -> V | None:
        value = self._entries.pop(key, None)
        if value is not None:
            self.held -= self._weight(value)
        return value


def _one(_value: object) -> int:
    return 1
