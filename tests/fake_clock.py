"""A clock the test moves: injected where the code under test reads the time."""

from __future__ import annotations


class FakeClock:
    """Reads `now`, which only the test changes (seconds, monotonic)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
