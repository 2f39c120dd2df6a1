"""The vectors of recently searched scopes, kept so an exact scoped search does not fetch them
from the vector store on every query.

A chunk id is derived from its tenant, document, page and text, so the vector stored under it
changes only when the tenant is re-embedded (another model: the index drops the tenant's entries,
`forget`) or when an upsert writes the id again (a re-upload embedding a changed section path:
the entries holding it go, `overwritten`). Entries are whole scopes (the ids asked for, in order,
and their matrix), least recently used first out, within a budget of vectors across all tenants.
A scope that changed (an upload into it) is assembled from the tenant's newest entry: only the
ids it lacks are fetched (`newest`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from app.memory import HotMap

DEFAULT_BUDGET = 50_000  # vectors across all kept scopes (~100 MB at 512 float32 dimensions)


@dataclass(frozen=True)
class ScopeMatrix:
    """A scope's chunk ids that have a vector, and their unit vectors as rows."""

    ids: tuple[str, ...]
    units: np.ndarray

    @cached_property
    def row_of(self) -> dict[str, int]:
        """Each chunk id's row."""
        return {cid: row for row, cid in enumerate(self.ids)}

    def reused(self, ids: Sequence[str], fetched: ScopeMatrix) -> ScopeMatrix:
        """The matrix of these ids (each one of this matrix's), in their order, then `fetched`'s
        rows, in a matrix made once."""
        units = np.empty((len(ids) + len(fetched.ids), self.units.shape[1]), self.units.dtype)
        rows = np.fromiter((self.row_of[cid] for cid in ids), np.int64, len(ids))
        units[: len(ids)] = self.units[rows]
        units[len(ids) :] = fetched.units
        return ScopeMatrix(tuple(ids) + fetched.ids, units)


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

    def newest(self, tenant_id: str) -> ScopeMatrix | None:
        """The tenant's most recently used matrix (its order unchanged); None when none is kept."""
        found = self._kept.newest(lambda _key, kept: kept[0] == tenant_id)
        return None if found is None else found[1][1]

    def overwritten(self, tenant_id: str, chunk_ids: Sequence[str]) -> None:
        """Drop the tenant's matrices that hold any of these ids (their vectors were written)."""
        written = frozenset(chunk_ids)
        self._kept.pop_where(
            lambda _key, kept: (
                kept[0] == tenant_id and not kept[1].row_of.keys().isdisjoint(written)
            )
        )

    def forget(self, tenant_id: str) -> None:
        """Drop every matrix of a tenant (its vectors were rebuilt)."""
        self._kept.pop_where(lambda _key, kept: kept[0] == tenant_id)
