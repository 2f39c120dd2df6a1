"""Which collections a caller may read, write and manage: resolved once per request.

The tenant role is the ceiling: an admin manages every collection; a member gets what the
collection's visibility and the grants to the user and to the user's groups give; a reader gets
the same but never more than read. Visibility `tenant` lets every user read a collection and,
as before collections existed, lets a member add documents to it and replace or delete the ones
they uploaded (`own_documents_only`); a write grant extends that to every document in it. An
API key acts with its owner's permissions at the time of use, narrowed to the collections it
was limited to when made.

Freshness: every request reads the tenant's access version, in the query that checks its
credential (the user row of a token, the key and its owner), or here when it was not read; the
tenant's grants are reloaded when it moved, in this process or another. Resolved permissions
are memoised per (version, user, role, key limit), so resolving costs no round trip of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from app.domain import GENERAL_COLLECTION, Role
from app.memory import HotMap
from app.storage.collections import AccessGraph, AccessStore, Permission

_RANK: dict[str, int] = {"read": 1, "write": 2, "manage": 3}
_MEMO_SIZE = 4096


def permission_at_least(granted: str | None, needed: Permission) -> bool:
    """Whether `granted` includes `needed` (manage > write > read)."""
    return granted is not None and _RANK[granted] >= _RANK[needed]


@dataclass(frozen=True)
class CollectionAccess:
    """A caller's permission on each collection it may read, at one access version."""

    tenant_id: str
    version: int
    permissions: Mapping[str, Permission]
    # Every collection of the tenant (id -> name), readable or not: an unrestricted caller
    # reads them all.
    all_collections: Mapping[str, str] = field(default_factory=dict)
    # Collections a member writes only by their visibility: only their own documents.
    own_documents_only: frozenset[str] = frozenset()
    # Whether an API key limited to some collections narrows this (its owner's) access.
    key_limited: bool = False

    @property
    def readable(self) -> frozenset[str]:
        """Ids of the collections the caller may read."""
        return frozenset(self.permissions)

    @property
    def writable(self) -> frozenset[str]:
        """Ids of the collections the caller may upload to, replace in and delete from."""
        return frozenset(c for c, p in self.permissions.items() if _RANK[p] >= 2)

    @property
    def reads_everything(self) -> bool:
        """Whether the caller reads every collection of the tenant."""
        return len(self.permissions) == len(self.all_collections)

    def permission(self, collection_id: str) -> Permission | None:
        """The caller's permission on a collection (None: it may not even read it)."""
        return self.permissions.get(collection_id)

    def can(self, *, collection_id: str, needed: Permission) -> bool:
        """Whether the caller has at least `needed` on the collection."""
        return permission_at_least(self.permissions.get(collection_id), needed)

    def may_change_any(self, collection_id: str) -> bool:
        """Whether the caller may replace and delete every document of the collection (not
        only the ones they uploaded)."""
        return (
            self.can(collection_id=collection_id, needed="write")
            and collection_id not in self.own_documents_only
        )


def reads_everything_ever(role: Role, access: CollectionAccess) -> bool:
    """Whether the caller may learn of anything in any collection of the tenant, deleted ones
    included: an admin reading every collection. Reading every collection there is now is not
    enough, since a collection deleted since (its name, its documents' names, their jobs and
    events) may be one the caller never read."""
    return role == "admin" and access.reads_everything


def _memo_key(
    tenant_id: str,
    graph_version: int,
    user_id: str,
    role: Role,
    key_collections: tuple[str, ...] | None,
) -> tuple[object, ...]:
    """What a resolved `CollectionAccess` is held under: the same for `resolve`, which fills
    the memo, and `resolve_held`, which only reads it."""
    return (tenant_id, graph_version, user_id, role, key_collections)


class AccessResolver:
    """Resolves a caller's `CollectionAccess`; see the module docstring."""

    def __init__(self, store: AccessStore, hot_tenants: int = 64) -> None:
        self.store = store
        self._graphs: HotMap[str, AccessGraph] = HotMap(hot_tenants)
        self._memo: HotMap[tuple[object, ...], CollectionAccess] = HotMap(_MEMO_SIZE)
        self._lock = threading.Lock()

    def resolve(
        self,
        *,
        tenant_id: str,
        user_id: str,
        role: Role,
        key_collections: tuple[str, ...] | None = None,
        version: int | None = None,
    ) -> CollectionAccess:
        """The caller's permissions now (a change made by any process counts at once):
        `version` is the tenant's access version if the request already read it (with its
        credential), else it is read here."""
        if version is None:
            version = self.store.version(tenant_id)
        graph = self._graph(tenant_id, version)
        memo_key = _memo_key(tenant_id, graph.version, user_id, role, key_collections)
        found = self._memo.get(memo_key)
        if found is None:
            found = self._compute(tenant_id, graph, user_id, role, key_collections)
            self._memo.put(memo_key, found)
        return found

    def resolve_held(
        self,
        *,
        tenant_id: str,
        user_id: str,
        role: Role,
        key_collections: tuple[str, ...] | None,
        version: int,
    ) -> CollectionAccess | None:
        """`resolve` when its answer is already held for this access `version` (read with the
        credential), without any read of the database; None when it would have to read."""
        cached = self._graphs.get(tenant_id)
        if cached is None or cached.version < version:
            return None
        return self._memo.get(_memo_key(tenant_id, cached.version, user_id, role, key_collections))

    def _graph(self, tenant_id: str, version: int) -> AccessGraph:
        cached = self._graphs.get(tenant_id)
        # Versions only grow: a graph at least as new as the one the request read is current
        # for it (a request that read its version just before a change gets the changed one).
        if cached is not None and cached.version >= version:
            return cached
        with self._lock:
            graph = self.store.graph(tenant_id)
            if GENERAL_COLLECTION not in graph.collections:
                self.store.ensure_general(tenant_id)  # a new tenant: its first collection
                graph = self.store.graph(tenant_id)
            self._graphs.put(tenant_id, graph)
            return graph

    @staticmethod
    def _compute(
        tenant_id: str,
        graph: AccessGraph,
        user_id: str,
        role: Role,
        key_collections: tuple[str, ...] | None,
    ) -> CollectionAccess:
        names = {cid: c.name for cid, c in graph.collections.items()}
        permissions: dict[str, Permission] = {}
        own_only: set[str] = set()
        if role == "admin":
            permissions = dict.fromkeys(graph.collections, "manage")
        else:
            for cid, collection in graph.collections.items():
                if collection.visibility == "tenant":
                    permissions[cid] = "write" if role == "member" else "read"
                    own_only.add(cid)
            holders = [("user", user_id)] + [
                ("group", g) for g in graph.groups_of_user.get(user_id, ())
            ]
            for holder in holders:
                for cid, granted in graph.grants_of.get(holder, ()):
                    if cid not in graph.collections:
                        continue
                    if cid in own_only and _RANK[granted] >= _RANK["write"]:
                        own_only.discard(cid)  # a write grant: every document, not only own
                        permissions[cid] = granted
                    elif _RANK[granted] > _RANK.get(permissions.get(cid, ""), 0):
                        permissions[cid] = granted
            if role == "reader":
                permissions = dict.fromkeys(permissions, "read")
        if key_collections is not None:
            limit = set(key_collections)
            permissions = {c: p for c, p in permissions.items() if c in limit}
        own = frozenset(c for c in own_only if c in permissions)
        return CollectionAccess(
            tenant_id, graph.version, permissions, names, own, key_collections is not None
        )
