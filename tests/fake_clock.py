"""A clock the test moves: injected where the code under test reads the time."""

from __future__ import annotations


class FakeClock:
    """Reads `now`, which only the test changes (seconds, monotonic); with `tick`, every reading
    also moves it on by that much (time that passes as the code under test works)."""

    def __init__(self, start: float = 1000.0, tick: float = 0.0) -> None:
        self.now = start
        self.tick = tick

    def __call__(self) -> float:
        now = self.now
        self.now += self.tick
        return now

    def advance(self, seconds: float) -> None:
        self.now += seconds
