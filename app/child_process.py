"""Child processes that handle untrusted files (parsing, page rendering): OS resource limits
applied inside the child, and stopping a child that overran its time limit.

In the child, `apply_resource_limits` sets RLIMIT_AS (memory) and RLIMIT_CPU (CPU seconds):
past the memory limit an allocation fails (MemoryError in Python code; C code may abort, which
the parent sees as a child killed by a signal); past the soft CPU limit the child gets SIGXCPU,
raised as `CpuLimitReached`, and it is killed at the hard limit a little later.
"""

from __future__ import annotations

import contextlib
import multiprocessing.process
import os
import resource
import signal
import time

# After the soft CPU limit (SIGXCPU) the child has this long to report before SIGKILL.
CPU_GRACE_S = 5
# Exit codes of a child stopped by a resource limit (the OOM killer also sends SIGKILL).
LIMIT_EXIT_CODES = (-signal.SIGKILL, -signal.SIGXCPU)


class CpuLimitReached(BaseException):
    """Raised in the child by SIGXCPU: the soft RLIMIT_CPU is spent. A BaseException, like
    KeyboardInterrupt, so library code's `except Exception` cannot mistake it for a bad file."""


def _on_sigxcpu(signum: int, frame: object) -> None:
    raise CpuLimitReached


def apply_resource_limits(
    max_memory_bytes: int | None, max_cpu_s: int | None, cpu_grace_s: int = CPU_GRACE_S
) -> None:
    """In a child: cap its address space and CPU seconds (None leaves a resource unlimited).

    SIGXCPU reaches Python code only between C calls: work that stays in C (PDFium painting)
    is stopped by the hard limit, `cpu_grace_s` CPU seconds later.
    """
    # Only the soft limits bind the work; the hard ones stay above them so the child can
    # still report (memory) or is killed shortly after (CPU).
    if max_memory_bytes:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (max_memory_bytes, hard))
    if max_cpu_s:
        signal.signal(signal.SIGXCPU, _on_sigxcpu)
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        cpu_hard = max_cpu_s + cpu_grace_s
        if hard != resource.RLIM_INFINITY:
            cpu_hard = min(cpu_hard, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (min(max_cpu_s, cpu_hard), cpu_hard))


def lift_memory_limit() -> None:
    """In a child that hit its memory limit: allow memory again so it can report."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


def caused_by_memory(exc: BaseException) -> bool:
    """Whether a MemoryError is in `exc`'s cause chain (a library may wrap it)."""
    seen: BaseException | None = exc
    for _ in range(20):  # a bounded walk down the cause chain
        if seen is None:
            return False
        if isinstance(seen, MemoryError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def lead_process_group() -> None:
    """In a child: start its own process group, so that stopping the child also stops the
    programs it runs (Tesseract), which would otherwise finish their work orphaned."""
    os.setpgid(0, 0)


def stop_child(process: multiprocessing.process.BaseProcess, grace_s: float) -> None:
    """Terminate `process` (and the programs it runs, if it leads a process group:
    `lead_process_group`), and kill it if it has not exited after `grace_s` seconds."""
    _signal_group(process, signal.SIGTERM)
    process.terminate()
    process.join(grace_s)
    if process.is_alive():
        _signal_group(process, signal.SIGKILL)
        process.kill()
        process.join()


def _signal_group(process: multiprocessing.process.BaseProcess, signum: int) -> None:
    # Only while the child is not yet reaped (its pid cannot have been reused).
    if process.pid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):  # it leads no group
        os.killpg(process.pid, signum)


def reap_child(
    process: multiprocessing.process.BaseProcess, started: float, grace_s: float
) -> None:
    """Let a child that has sent its answer exit within `grace_s` of `started` (monotonic),
    then stop it: no child outlives the call that started it."""
    if not process.is_alive():
        return
    process.join(max(grace_s - (time.monotonic() - started), 0.1))
    if process.is_alive():
        stop_child(process, grace_s)
