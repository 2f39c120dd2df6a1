"""The kept scope matrices: most recently used kept within the vector budget, a tenant's
dropped at once when its vectors are rebuilt."""

from __future__ import annotations

import numpy as np
import pytest

from app.storage.scope_vectors import ScopeMatrix, ScopeVectors, scope_digest

pytestmark = pytest.mark.unit


def _matrix(rows: int) -> ScopeMatrix:
    return ScopeMatrix(tuple(f"c{i}" for i in range(rows)), np.ones((rows, 4), np.float32))


def test_the_least_recently_used_scopes_go_first_within_the_budget() -> None:
    kept = ScopeVectors(budget=10)
    kept.put("a", "acme", _matrix(4))
    kept.put("b", "acme", _matrix(4))
    assert kept.get("a") is not None  # a is now the most recently used
    kept.put("c", "globex", _matrix(4))  # 12 > 10: b goes
    assert kept.get("b") is None and kept.get("a") is not None and kept.get("c") is not None
    kept.put("huge", "acme", _matrix(11))  # larger than the whole budget: never kept
    assert kept.get("huge") is None and kept.get("a") is not None


def test_a_rebuilt_tenant_keeps_nothing_and_others_keep_theirs() -> None:
    kept = ScopeVectors(budget=100)
    kept.put(scope_digest("acme", ["c1"]), "acme", _matrix(1))
    kept.put(scope_digest("globex", ["c1"]), "globex", _matrix(1))
    kept.forget("acme")
    assert kept.get(scope_digest("acme", ["c1"])) is None
    assert kept.get(scope_digest("globex", ["c1"])) is not None
    assert scope_digest("acme", ["c1", "c2"]) != scope_digest("acme", ["c1c2"])
