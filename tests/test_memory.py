"""The hot-tenant LRU and the memory budget (app/memory.py)."""

from __future__ import annotations

import pytest

from app.memory import HotMap, MemoryBudget, resident_mb

pytestmark = pytest.mark.unit


def test_the_least_recently_used_tenant_goes_first_and_is_handed_over() -> None:
    evicted: list[tuple[str, int]] = []
    hot: HotMap[str, int] = HotMap(2, on_evict=lambda key, value: evicted.append((key, value)))
    hot.put("a", 1)
    hot.put("b", 2)
    assert hot.get("a") == 1  # now b is the least recently used
    hot.put("c", 3)
    assert evicted == [("b", 2)]
    assert hot.keys() == ["a", "c"] and len(hot) == 2 and hot.evictions == 1
    assert hot.get("b") is None
    assert hot.pop("a") == 1 and hot.evictions == 1  # forgetting is not evicting


def test_a_weighed_map_keeps_what_fits_its_bound_and_forgets_what_it_is_told() -> None:
    hot: HotMap[str, bytes] = HotMap(10, weight=len)
    hot.put("a", b"xxxx")
    hot.put("b", b"xxxx")
    hot.put("a", b"xxx")  # replaced: a weighs 3 now, and is the most recently used
    hot.put("c", b"xxxx")  # 11 > 10: b goes
    assert hot.keys() == ["a", "c"] and hot.held == 7 and hot.evictions == 1
    hot.put("huge", b"x" * 11)  # heavier than the whole bound: not kept, nothing evicted
    assert hot.get("huge") is None and hot.keys() == ["a", "c"] and hot.evictions == 1
    hot.pop_where(lambda key, _value: key == "a")
    assert hot.keys() == ["c"] and hot.held == 4 and hot.evictions == 1
    off: HotMap[str, bytes] = HotMap(0, weight=len)  # a weighed bound of 0 keeps nothing
    off.put("a", b"x")
    assert off.get("a") is None and len(off) == 0


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        HotMap(0)


def test_the_budget_trims_only_above_it_and_at_most_once_per_interval() -> None:
    now, resident = [0.0], [500.0]
    budget = MemoryBudget(400, clock=lambda: now[0], resident=lambda: resident[0])
    budget.after_eviction()
    budget.after_eviction()  # same instant: skipped
    assert budget.trims == 1
    now[0] = 5.0
    resident[0] = 300.0  # under budget: nothing to give back
    budget.after_eviction()
    assert budget.trims == 1 and not budget.over()
    unbounded = MemoryBudget(0, clock=lambda: now[0], resident=lambda: resident[0])
    unbounded.after_eviction()
    assert unbounded.trims == 1 and not unbounded.over()


def test_this_process_reads_its_resident_size() -> None:
    assert 10 < resident_mb() < 100_000
