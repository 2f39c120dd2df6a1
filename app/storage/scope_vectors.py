"""The vectors of recently searched scopes, kept so an exact scoped search does not fetch them
from the vector store on every query.

A chunk id is derived from its tenant, document, page and text, so the vector stored under it
changes only when the tenant is re-embedded by another model; the index drops a tenant's
entries then (`forget`). Entries are whole scopes (the ids asked for, in order, and their
matrix), least recently used first out, within a budget of vectors across all tenants.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.memory import HotMap

DEFAULT_BUDGET = 50_000  # vectors across all kept scopes (~100 MB at 512 float32 dimensions)


@dataclass(frozen=True)
class ScopeMatrix:
    """A scope's chunk ids that have a vector, and their unit vectors as rows."""

    ids: tuple[str, ...]
    units: np.ndarray


def scope_digest(tenant_id: str, chunk_ids: Sequence[str]) -> str:
    """The key of one tenant's scope of chunks."""
    digest = hashlib.sha256(tenant_id.encode("utf-8"))
    for chunk_id in chunk_ids:
        digest.update(b"\x00" + chunk_id.encode("utf-8"))
    return digest.hexdigest()


class ScopeVectors:
    """An LRU of scope matrices within a vector budget; thread-safe."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self.budget = budget
        self._kept: HotMap[str, tuple[str, ScopeMatrix]] = HotMap(
            budget, weight=lambda kept: len(kept[1].ids)
        )

    def get(self, key: str) -> ScopeMatrix | None:
        """The matrix kept under `key`, now the most recently used; None when not kept."""
        found = self._kept.get(key)
        return None if found is None else found[1]

    def put(self, key: str, tenant_id: str, matrix: ScopeMatrix) -> None:
        """Keep a matrix (one larger than the whole budget is not kept)."""
        self._kept.put(key, (tenant_id, matrix))

    def forget(self, tenant_id: str) -> None:
        """Drop every matrix of a tenant (its vectors were rebuilt)."""
        self._kept.pop_where(lambda _key, kept: kept[0] == tenant_id)
