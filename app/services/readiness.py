"""What `/ready` checks: models loaded, database and vector store reachable."""

from __future__ import annotations

from collections.abc import Callable

from app.services.container import Container


def readiness_problems(container: Container, *, loaded: bool) -> dict[str, str]:
    """A component name -> problem map; empty when the service can take traffic."""
    if not loaded:
        return {"models": "still loading"}
    problems: dict[str, str] = {}
    checks: dict[str, Callable[[], bool]] = {
        "database": container.database.ping,
        "vector_store": lambda: container.corpus.count("__readiness_probe__") >= 0,
    }
    for name, check in checks.items():
        try:
            ok = bool(check())
        except Exception as exc:
            problems[name] = f"unreachable: {type(exc).__name__}"
            continue
        if not ok:
            problems[name] = "unreachable"
    return problems
