"""What a queued job's turn on a worker allows the parse of its file: a total time limit, and,
for a long scan, a turn of pages after which the job gives its worker back when another
tenant's job is waiting (one 200-page scan used to hold a worker thread for hours)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.errors import JobTimedOut


def _nobody_waits() -> bool:
    return False


@dataclass(frozen=True)
class ParseTurn:
    """The job's deadline (`time.monotonic()`; None: no limit) and the limit it comes from, in
    seconds; where the pages it OCRs are kept (None: nowhere, nothing to resume); and after how
    many pages read in this turn (0: never) it yields if `others_waiting()`."""

    deadline: float | None = None
    limit_s: float = 0.0
    checkpoint: Path | None = None
    pages_per_turn: int = 0
    others_waiting: Callable[[], bool] = _nobody_waits

    def seconds_left(self) -> float | None:
        """Time left before the deadline (may be negative); None without one."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def timed_out(self) -> JobTimedOut:
        """The error of a job stopped at its deadline."""
        return JobTimedOut(
            f"indexing this file took longer than the job time limit of {self.limit_s:g} s and "
            "was stopped; split the file into smaller ones, or ask the operator to raise "
            "RAG_JOB_TIMEOUT_S"
        )

    def check(self) -> None:
        """JobTimedOut once the deadline has passed."""
        left = self.seconds_left()
        if left is not None and left <= 0:
            raise self.timed_out()

    def should_yield(self, pages_read: int) -> bool:
        """Whether, having read `pages_read` pages in this turn, the job gives its worker back."""
        every = self.pages_per_turn
        return every > 0 and pages_read > 0 and pages_read % every == 0 and self.others_waiting()
