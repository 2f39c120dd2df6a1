"""Stopping a child process that overran its time limit (parsing, page rendering)."""

from __future__ import annotations

import multiprocessing.process


def stop_child(process: multiprocessing.process.BaseProcess, grace_s: float) -> None:
    """Terminate `process`, and kill it if it has not exited after `grace_s` seconds."""
    process.terminate()
    process.join(grace_s)
    if process.is_alive():
        process.kill()
        process.join()
