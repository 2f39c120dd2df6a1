"""The local scale-out stack, started for a test and closed after it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from testkit.local_stack import LocalStack, Process
from tests.availability import unavailable


@contextlib.contextmanager
def running_stack(
    root: Path, settings: dict[str, str], apis: int = 2, workers: int = 1
) -> Iterator[tuple[LocalStack, list[Process]]]:
    """A stack with `apis` API processes and `workers` workers, all ready; closed afterwards,
    failing when it left Redis keys behind. Missing backends fail the test (or skip it where
    RAG_TEST_ALLOW_SKIP_SERVICES allows)."""
    local = LocalStack(root, settings=settings)
    try:
        try:
            local.start_backends()
        except Exception as exc:  # no PostgreSQL / Redis / chroma CLI here
            unavailable(f"scale-out backends unavailable: {exc}")
        started = [local.start_api(f"api{n}") for n in range(1, apis + 1)]
        running = [local.start_worker(f"w{n}") for n in range(1, workers + 1)]
        for api in started:
            local.wait_ready(api)
        for worker in running:
            local.wait_worker_ready(worker)
        yield local, started
    finally:
        leftovers = local.close()
        assert not leftovers, f"Redis keys left behind: {leftovers[:10]}"
