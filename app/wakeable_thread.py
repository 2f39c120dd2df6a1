"""A daemon thread that runs a polling loop until stopped, and that can be woken from its wait
when there is work (the evaluation runner, the webhook dispatcher)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class WakeableThread:
    """Runs `loop` on a daemon thread named `name`. The loop checks `stopping`, and between
    passes waits with `wait`, which `wake()` cuts short."""

    def __init__(self, loop: Callable[[], None], name: str) -> None:
        self._loop = loop
        self._name = name
        self._woken = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (again after `stop`); nothing while it runs."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """There is work: end the loop's current wait (or its next one) now."""
        self._woken.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the loop to finish (it sees `stopping`, and its wait ends) and wait for it."""
        self._stop.set()
        self._woken.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    @property
    def stopping(self) -> bool:
        """Whether `stop` was asked: the loop should end."""
        return self._stop.is_set()

    def wait(self, timeout_s: float) -> None:
        """Wait until woken (or already woken) or `timeout_s` passes; the wake is kept until
        `take_wake`."""
        self._woken.wait(timeout_s)

    def take_wake(self) -> bool:
        """Whether it was woken since the last call, forgetting the wake."""
        woken = self._woken.is_set()
        self._woken.clear()
        return woken
