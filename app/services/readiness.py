"""What `/ready` checks: models loaded, database and vector store reachable."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

Check = Callable[[], bool]
_PROBE_TENANT = "__readiness_probe__"


class _Counts(Protocol):
    def count(self, tenant_id: str) -> int: ...


def vector_store_answers(store: _Counts) -> bool:
    """Whether the vector store answers a count (for a tenant that never exists)."""
    return store.count(_PROBE_TENANT) >= 0


def readiness_problems(checks: Mapping[str, Check], *, loaded: bool) -> dict[str, str]:
    """A component name -> problem map; empty when the service can take traffic.

    The checks run only once the models are loaded.
    """
    if not loaded:
        return {"models": "still loading"}
    problems: dict[str, str] = {}
    for name, check in checks.items():
        try:
            ok = bool(check())
        except Exception as exc:
            problems[name] = f"unreachable: {type(exc).__name__}"
            continue
        if not ok:
            problems[name] = "unreachable"
    return problems
