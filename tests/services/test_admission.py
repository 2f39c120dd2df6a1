"""The answer limiter: per-user, per-tenant and total bounds, a bounded fair queue, timeouts and
release on cancel. Time is injected (a hand-fired wait timer, a settable clock): no sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from app.errors import Overloaded
from app.services.blocks.admission import Bounds, Caller, ConcurrencyLimiter, Slot
from tests.fake_clock import FakeClock

pytestmark = pytest.mark.unit

A1, A2, A3 = Caller("tenant-a", "a1"), Caller("tenant-a", "a2"), Caller("tenant-a", "a3")
B1, C1 = Caller("tenant-b", "b1"), Caller("tenant-c", "c1")


class HandTimer:
    """A wait timer that expires only when the test fires it."""

    def __init__(self) -> None:
        self.started: list[float] = []
        self._fired = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.started.append(seconds)
        await self._fired.wait()

    def fire(self) -> None:
        self._fired.set()


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(scenario())


async def settle() -> None:
    """Let every ready task run (no time passes)."""
    for _ in range(5):
        await asyncio.sleep(0)


def limiter(timer: HandTimer | None = None, clock: FakeClock | None = None, **bounds: Any) -> Any:
    values = {"total": 2, "per_tenant": 2, "per_user": 1, "queue_total": 4, "queue_per_tenant": 2}
    values.update(bounds)
    values.setdefault("max_wait_s", 30.0)
    return ConcurrencyLimiter(
        "answers",
        Bounds(**values),
        wait_timer=timer or HandTimer(),
        clock=clock or FakeClock(100.0),
    )


def running_for(lim: ConcurrencyLimiter, caller: Caller) -> tuple[int, int]:
    """Slots held by the caller's tenant and by the caller."""
    return lim._by_tenant[caller.tenant_id], lim._by_user[caller.user_id]


def test_a_user_beyond_its_bound_waits_and_starts_when_its_slot_is_released() -> None:
    async def scenario() -> None:
        lim = limiter()
        first = await lim.acquire(A1)
        second = asyncio.ensure_future(lim.acquire(A1))
        await settle()
        assert not second.done() and lim.waiting == 1 and lim.running == 1
        first.release()
        await settle()
        slot = second.result()
        assert slot.queued and lim.running == 1 and lim.waiting == 0
        slot.release()
        slot.release()  # idempotent: the count does not go negative
        assert lim.running == 0

    run(scenario)


def test_the_tenant_bound_holds_back_a_second_user_but_not_another_tenant() -> None:
    async def scenario() -> None:
        lim = limiter(total=3, per_tenant=1, per_user=1)
        await lim.acquire(A1)
        blocked = asyncio.ensure_future(lim.acquire(A2))
        other = await lim.acquire(B1)  # would not return if B queued behind A's waiter
        await settle()
        assert not blocked.done()
        assert running_for(lim, A2) == (1, 0) and running_for(lim, B1) == (1, 1)
        other.release()
        await settle()
        assert not blocked.done(), "B's release must not admit A beyond A's tenant bound"
        blocked.cancel()

    run(scenario)


def test_the_total_bound_queues_everyone_and_a_full_queue_is_a_fast_503() -> None:
    async def scenario() -> None:
        lim = limiter(total=1, per_tenant=1, per_user=1, queue_total=2, queue_per_tenant=2)
        await lim.acquire(A1)
        waiting = [asyncio.ensure_future(lim.acquire(c)) for c in (B1, C1)]
        await settle()
        assert lim.waiting == 2
        with pytest.raises(Overloaded) as refused:
            await lim.acquire(Caller("tenant-d", "d1"))
        assert refused.value.http_status == 503 and refused.value.code == "server_busy"
        assert refused.value.retry_after_s >= 1
        for task in waiting:
            task.cancel()

    run(scenario)


def test_a_full_tenant_queue_is_a_fast_429_for_that_tenant_only() -> None:
    async def scenario() -> None:
        lim = limiter(total=1, per_tenant=1, per_user=1, queue_total=4, queue_per_tenant=2)
        await lim.acquire(A1)
        queued = [asyncio.ensure_future(lim.acquire(c)) for c in (A2, A3)]
        await settle()
        with pytest.raises(Overloaded) as refused:
            await lim.acquire(Caller("tenant-a", "a4"))
        assert refused.value.http_status == 429 and refused.value.code == "concurrency_limited"
        other = asyncio.ensure_future(lim.acquire(B1))  # B still has room in the queue
        await settle()
        assert not other.done() and lim.waiting == 3
        for task in [*queued, other]:
            task.cancel()

    run(scenario)


def test_a_freed_slot_goes_to_the_tenant_served_longest_ago() -> None:
    async def scenario() -> None:
        lim = limiter(total=1, per_tenant=1, per_user=5, queue_total=8, queue_per_tenant=4)
        running: Slot = await lim.acquire(A1)
        a_queue = [asyncio.ensure_future(lim.acquire(A1)) for _ in range(3)]
        await settle()
        b_single = asyncio.ensure_future(lim.acquire(B1))  # arrives after all of A's
        await settle()
        order: list[str] = []
        for _ in range(4):
            running.release()
            await settle()
            done = [t for t in [*a_queue, b_single] if t.done() and not t.result().released]
            assert len(done) == 1
            running = done[0].result()
            order.append(running.caller.tenant_id)
        running.release()
        # B waited behind exactly one of A's answers (the one running when it came).
        assert order == ["tenant-b", "tenant-a", "tenant-a", "tenant-a"]
        assert lim.running == 0 and lim.waiting == 0

    run(scenario)


def test_background_work_waits_behind_people_without_taking_their_queue_or_timing_out() -> None:
    background = Caller("tenant-a", "", background=True)

    async def scenario() -> None:
        timer = HandTimer()
        lim = limiter(timer, total=1, per_tenant=1, per_user=1, queue_total=1, queue_per_tenant=1)
        held = await lim.acquire(A1)
        run_answer = asyncio.ensure_future(lim.acquire(background))
        await settle()
        assert timer.started == []  # no max_wait: it waits as long as people need the slot
        person = asyncio.ensure_future(lim.acquire(B1))  # came later; the one queue place
        await settle()
        timer.fire()  # the person's wait runs out...
        await settle()
        with pytest.raises(Overloaded):
            person.result()
        assert not run_answer.done()  # ...the run's does not
        held.release()
        await settle()
        assert run_answer.done() and run_answer.result().caller.background
        run_answer.result().release()
        assert lim.running == 0 and lim.waiting == 0

    async def people_first() -> None:
        lim = limiter(total=1, per_tenant=1, per_user=1)
        held = await lim.acquire(A1)
        run_answer = asyncio.ensure_future(lim.acquire(background))
        await settle()
        late = asyncio.ensure_future(lim.acquire(A2))  # same tenant, came after the run
        await settle()
        held.release()
        await settle()
        assert late.done() and not run_answer.done()
        late.result().release()
        await settle()
        assert run_answer.done()
        run_answer.result().release()

    run(scenario)
    run(people_first)


def test_a_wait_that_outlasts_max_wait_is_refused_and_leaves_the_queue() -> None:
    async def scenario() -> None:
        timer = HandTimer()
        lim = limiter(timer, total=2, per_tenant=2, per_user=1, max_wait_s=7.5)
        held = await lim.acquire(A1)
        own = asyncio.ensure_future(lim.acquire(A1))
        await settle()
        assert timer.started == [7.5]
        timer.fire()
        await settle()
        with pytest.raises(Overloaded) as refused:
            own.result()
        # Blocked by the caller's own per-user bound: 429, not "server busy".
        assert refused.value.http_status == 429
        assert "waited 7.5 s" in refused.value.message
        assert lim.waiting == 0 and lim.running == 1
        held.release()
        assert lim.running == 0

    run(scenario)


def test_a_timeout_behind_other_tenants_is_a_503() -> None:
    async def scenario() -> None:
        timer = HandTimer()
        lim = limiter(timer, total=1, per_tenant=1, per_user=1)
        await lim.acquire(A1)
        waiting = asyncio.ensure_future(lim.acquire(B1))
        await settle()
        timer.fire()
        await settle()
        with pytest.raises(Overloaded) as refused:
            waiting.result()
        assert refused.value.http_status == 503

    run(scenario)


def test_a_cancelled_waiter_leaves_the_queue_and_takes_no_slot() -> None:
    async def scenario() -> None:
        lim = limiter(total=1, per_tenant=1, per_user=1)
        held = await lim.acquire(A1)
        leaving = asyncio.ensure_future(lim.acquire(B1))
        staying = asyncio.ensure_future(lim.acquire(C1))
        await settle()
        leaving.cancel()
        await settle()
        assert lim.waiting == 1
        held.release()
        await settle()
        assert staying.result().caller == C1 and lim.running == 1

    run(scenario)


def test_a_waiter_cancelled_just_as_it_was_granted_gives_the_slot_back() -> None:
    async def scenario() -> None:
        lim = limiter(total=1, per_tenant=1, per_user=1)
        held = await lim.acquire(A1)
        leaving = asyncio.ensure_future(lim.acquire(B1))
        await settle()
        held.release()  # grants B's future ...
        leaving.cancel()  # ... and B's task is cancelled before it could resume
        await settle()
        assert leaving.cancelled()
        assert lim.running == 0 and lim.waiting == 0
        assert (await lim.acquire(C1)).caller == C1

    run(scenario)


def test_retry_after_follows_how_long_slots_are_held() -> None:
    async def scenario() -> None:
        clock = FakeClock(100.0)
        lim = ConcurrencyLimiter(
            "answers",
            Bounds(total=1, per_tenant=1, per_user=1, queue_total=0, queue_per_tenant=0),
            clock=clock,
            typical_hold_s=1.0,
        )
        for _ in range(12):  # answers that each take 20 s
            slot = await lim.acquire(A1)
            clock.now += 20.0
            slot.release()
        await lim.acquire(A1)
        with pytest.raises(Overloaded) as refused:
            await lim.acquire(B1)
        assert 15 <= refused.value.retry_after_s <= 20

    run(scenario)


def test_bounds_below_one_are_rejected() -> None:
    with pytest.raises(ValueError):
        Bounds(total=0, per_tenant=1, per_user=1)
    with pytest.raises(ValueError):
        Bounds(total=1, per_tenant=1, per_user=1, queue_total=-1)


def test_without_a_queue_a_full_server_is_503_and_a_full_user_is_429() -> None:
    async def scenario() -> None:
        streams = ConcurrencyLimiter("streams", Bounds(total=2, per_tenant=2, per_user=1))
        await streams.acquire(A1)
        with pytest.raises(Overloaded) as own:
            await streams.acquire(A1)
        assert own.value.http_status == 429 and "every slot is taken" in own.value.message
        await streams.acquire(B1)
        with pytest.raises(Overloaded) as busy:
            await streams.acquire(C1)
        assert busy.value.http_status == 503 and streams.waiting == 0

    run(scenario)
