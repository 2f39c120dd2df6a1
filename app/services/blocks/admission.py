"""Admission control: bounded concurrency per user, per tenant and in total, with a bounded wait
queue, on the event loop.

A caller that cannot start now waits on an asyncio future, never in a thread, for at most
`max_wait_s`; when the queue (in total, or the caller's tenant's share of it) is full it is
refused at once. A freed slot goes to the eligible waiter whose tenant has the fewest slots
running and, among those, was served longest ago (round robin between tenants), then to the
earliest: a tenant with many queued answers keeps another tenant's single answer waiting behind
at most one of them. Background work (an evaluation run's answers) waits behind every person:
a freed slot goes to a person's question whenever one waits, even one that arrived after the
background caller, and a background caller neither takes a place of the bounded queue nor gives
up after `max_wait_s` (its owner cancels it). Refusals say whose bound was hit: the caller's own
user or tenant (429) or the server as a whole (503), with an estimate of when to retry.

One limiter serves one event loop (one API process); it is not thread-safe and needs no lock.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from app import metrics
from app.errors import Overloaded

WaitTimer = Callable[[float], Awaitable[object]]


@dataclass(frozen=True)
class Bounds:
    """How many may run at once (in total, per tenant, per user) and how many may wait."""

    total: int
    per_tenant: int
    per_user: int
    queue_total: int = 0
    queue_per_tenant: int = 0
    max_wait_s: float = 0.0

    def __post_init__(self) -> None:
        if min(self.total, self.per_tenant, self.per_user) < 1:
            raise ValueError("concurrency bounds must be at least 1")
        if min(self.queue_total, self.queue_per_tenant) < 0 or self.max_wait_s < 0:
            raise ValueError("queue bounds and the wait must not be negative")


@dataclass(frozen=True)
class Caller:
    """Who asks: the unit of the per-user and per-tenant bounds."""

    tenant_id: str
    user_id: str
    background: bool = False  # lower priority: admitted only when no person waits


class Slot:
    """Permission to run one piece of work; `release` it exactly when the work has ended."""

    def __init__(self, limiter: ConcurrencyLimiter, caller: Caller, started: float) -> None:
        self._limiter = limiter
        self.caller = caller
        self._started = started
        self.queued = False  # True when the caller had to wait for it
        self.released = False

    def release(self) -> None:
        """Give the slot back (idempotent); the next eligible waiter starts at once."""
        if not self.released:
            self.released = True
            self._limiter._release(self, self._started)


@dataclass(eq=False)
class _Waiter:
    caller: Caller
    future: asyncio.Future[Slot]
    order: int = field(default=0)


class ConcurrencyLimiter:
    """Bounded concurrency with a bounded, fair wait queue (see the module docstring)."""

    def __init__(
        self,
        name: str,
        bounds: Bounds,
        *,
        clock: Callable[[], float] = time.monotonic,
        wait_timer: WaitTimer = asyncio.sleep,
        typical_hold_s: float = 5.0,
    ) -> None:
        self.name = name
        self.bounds = bounds
        self._clock = clock
        self._wait_timer = wait_timer
        self._running = 0
        self._by_tenant: Counter[str] = Counter()
        self._by_user: Counter[str] = Counter()
        self._waiters: list[_Waiter] = []
        self._order = itertools.count()
        # When each tenant last got a slot: among waiters, the tenant served longest ago goes
        # first (round robin between tenants), then the earliest arrival.
        self._grants = itertools.count()
        self._last_grant: dict[str, int] = {}
        # How long a slot is usually held, for Retry-After; starts from a guess, then follows
        # what it measures (exponential moving average).
        self._hold_s = typical_hold_s

    @property
    def running(self) -> int:
        """Slots held right now."""
        return self._running

    @property
    def waiting(self) -> int:
        """Callers queued right now."""
        return len(self._waiters)

    def _people_waiting(self) -> list[_Waiter]:
        return [w for w in self._waiters if not w.caller.background]

    async def acquire(self, caller: Caller) -> Slot:
        """A slot now, or after a bounded wait; raises Overloaded when there is no room."""
        if self._fits(caller):
            return self._grant(caller)
        if not caller.background:
            self._check_queue_room(caller)
        waiter = _Waiter(caller, asyncio.get_running_loop().create_future(), next(self._order))
        self._waiters.append(waiter)
        self._report()
        # Background work waits as long as people keep the slots busy.
        waiting = (
            asyncio.Event().wait()
            if caller.background
            else self._wait_timer(self.bounds.max_wait_s)
        )
        timer: asyncio.Future[Any] = asyncio.ensure_future(waiting)
        racing: set[asyncio.Future[Any]] = {waiter.future, timer}
        try:
            await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled (the client left): never strand a granted slot
            self._abandon(waiter)
            raise
        finally:
            timer.cancel()
        if waiter.future.done():
            return waiter.future.result()
        self._abandon(waiter)
        raise self._refusal(caller, f"waited {self.bounds.max_wait_s:g} s without a free slot")

    def _fits(self, caller: Caller) -> bool:
        return (
            self._running < self.bounds.total
            and self._by_tenant[caller.tenant_id] < self.bounds.per_tenant
            and self._by_user[caller.user_id] < self.bounds.per_user
        )

    def _own_bound_full(self, caller: Caller) -> bool:
        return (
            self._by_tenant[caller.tenant_id] >= self.bounds.per_tenant
            or self._by_user[caller.user_id] >= self.bounds.per_user
        )

    def _check_queue_room(self, caller: Caller) -> None:
        why = "the wait queue is full" if self.bounds.queue_total else "every slot is taken"
        people = self._people_waiting()
        if len(people) >= self.bounds.queue_total:
            raise self._refusal(caller, why)
        tenant_waiting = sum(1 for w in people if w.caller.tenant_id == caller.tenant_id)
        if tenant_waiting >= self.bounds.queue_per_tenant:
            raise self._refusal(caller, "your tenant's share of the queue is full", own=True)

    def _report(self) -> None:
        metrics.admission(self.name, len(self._waiters), self._running)

    def _refusal(self, caller: Caller, why: str, *, own: bool = False) -> Overloaded:
        ahead = len(self._waiters) + 1
        retry_after_s = max(1.0, math.ceil(self._hold_s * ahead / self.bounds.total))
        if own or self._own_bound_full(caller):
            metrics.admission_refused(self.name, "user_or_tenant")
            return Overloaded(
                f"too many {self.name} in progress for your user or tenant ({why}); "
                f"retry after {retry_after_s:g} s",
                retry_after_s,
                server_busy=False,
            )
        metrics.admission_refused(self.name, "server_busy")
        return Overloaded(
            f"the server is busy with other {self.name} ({why}); retry after {retry_after_s:g} s",
            retry_after_s,
            server_busy=True,
        )

    def _grant(self, caller: Caller) -> Slot:
        self._last_grant[caller.tenant_id] = next(self._grants)
        self._running += 1
        self._by_tenant[caller.tenant_id] += 1
        self._by_user[caller.user_id] += 1
        self._report()
        return Slot(self, caller, self._clock())

    def _release(self, slot: Slot, started: float) -> None:
        caller = slot.caller
        self._running -= 1
        self._by_tenant[caller.tenant_id] -= 1
        self._by_user[caller.user_id] -= 1
        for counter, key in ((self._by_tenant, caller.tenant_id), (self._by_user, caller.user_id)):
            if counter[key] <= 0:
                del counter[key]
        if caller.tenant_id not in self._by_tenant and not any(
            w.caller.tenant_id == caller.tenant_id for w in self._waiters
        ):
            self._last_grant.pop(caller.tenant_id, None)  # idle tenants are forgotten
        self._hold_s = 0.8 * self._hold_s + 0.2 * max(self._clock() - started, 0.0)
        self._dispatch()
        self._report()

    def _abandon(self, waiter: _Waiter) -> None:
        if waiter in self._waiters:
            self._waiters.remove(waiter)
            self._report()
        if waiter.future.done() and not waiter.future.cancelled():
            waiter.future.result().release()  # granted just as the caller left
        else:
            waiter.future.cancel()

    def _dispatch(self) -> None:
        """Start every waiter that now fits: people before background work, then the
        least-served tenant and user first."""
        while True:
            eligible = [w for w in self._waiters if self._fits(w.caller)]
            if not eligible:
                return
            chosen = min(
                eligible,
                key=lambda w: (
                    w.caller.background,
                    self._by_tenant[w.caller.tenant_id],
                    self._last_grant.get(w.caller.tenant_id, -1),
                    self._by_user[w.caller.user_id],
                    w.order,
                ),
            )
            self._waiters.remove(chosen)
            slot = self._grant(chosen.caller)
            slot.queued = True
            chosen.future.set_result(slot)
