"""The polling thread of the evaluation runner and the webhook dispatcher: a wake ends its wait
at once, a stop ends its loop, a second start while it runs starts nothing, and it runs again
after a stop."""

from __future__ import annotations

import threading

from app.wakeable_thread import WakeableThread

NAME = "wakeable-under-test"
POLL_S = 60.0  # far longer than the test waits: only a wake or a stop ends a wait


def _running() -> int:
    return sum(1 for t in threading.enumerate() if t.name == NAME and t.is_alive())


def test_a_wake_cuts_the_wait_short_and_a_stop_ends_the_loop() -> None:
    woken: list[bool] = []
    passed = threading.Semaphore(0)

    def loop() -> None:
        while not worker.stopping:
            woken.append(worker.take_wake())
            passed.release()
            worker.wait(POLL_S)

    worker = WakeableThread(loop, NAME)
    for _ in range(2):  # the second time: started again after a stop
        worker.start()
        worker.start()
        assert passed.acquire(timeout=5)
        assert _running() == 1
        worker.wake()
        assert passed.acquire(timeout=5), "the wake did not end the wait"
        worker.stop(timeout_s=5)
        assert _running() == 0
        assert woken[-1] is True
