"""Per-request stage timing held in a context variable, so concurrent requests never mix.

Stages never nest: starting a stage while another runs is a programming error, because nested
timers would be counted twice and the stages would no longer add up to the total.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from app import tracing


def clock() -> float:
    """Seconds on the clock every timer reads (a seam: tests swap in a deterministic clock)."""
    return time.perf_counter()


@dataclass
class StageTimer:
    """Milliseconds spent per named stage during one request."""

    started: float = field(default_factory=lambda: clock())
    stages: dict[str, float] = field(default_factory=dict)
    _running: str | None = None

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time one stage; repeated stages accumulate."""
        if self._running is not None:
            raise RuntimeError(f"stage {name!r} started inside stage {self._running!r}")
        self._running = name
        begin = clock()
        try:
            with tracing.span(f"stage {name}", stage=name):
                yield
        finally:
            elapsed = (clock() - begin) * 1000.0
            self.stages[name] = self.stages.get(name, 0.0) + elapsed
            self._running = None

    def record(self, name: str, ms: float) -> None:
        """Add time measured elsewhere (a wait on the event loop) as a stage of its own."""
        if self._running is not None:
            raise RuntimeError(f"stage {name!r} recorded inside stage {self._running!r}")
        self.stages[name] = self.stages.get(name, 0.0) + ms

    def total_ms(self) -> float:
        """Wall time since the timer was created."""
        return (clock() - self.started) * 1000.0

    def rounded(self) -> dict[str, float]:
        """Stage timings rounded for display."""
        return {name: round(ms, 2) for name, ms in self.stages.items()}


_current: ContextVar[StageTimer | None] = ContextVar("stage_timer", default=None)


def start_timer() -> StageTimer:
    """Begin timing a request in the current context and return its timer."""
    timer = StageTimer()
    _current.set(timer)
    return timer


@contextmanager
def timed(name: str) -> Iterator[None]:
    """Time a stage on the current request's timer; a no-op outside a timed request."""
    timer = _current.get()
    if timer is None:
        yield
        return
    with timer.stage(name):
        yield


class AtMostEvery:
    """Lets a chore (deleting expired rows) run at most once every `seconds` in this process;
    the first call always may."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._last: float | None = None
        self._lock = threading.Lock()

    def due(self) -> bool:
        """Whether the chore may run now; if so, it counts as run from now on."""
        now = time.monotonic()
        with self._lock:
            if self._last is not None and now - self._last < self.seconds:
                return False
            self._last = now
            return True
