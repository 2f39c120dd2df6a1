"""Waiting in a test for something another thread or process does on its own."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    condition: Callable[[], object], timeout_s: float = 10.0, interval_s: float = 0.01
) -> bool:
    """Whether `condition` turns true within `timeout_s`, looked at every `interval_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval_s)
    return bool(condition())
