"""Collections, groups and grants of a tenant as the API manages them, with the checks of who
may do what (app/services/collection_access.py decides the permissions).

A collection the caller may not read behaves exactly like a missing one (404, the same message);
one it reads but may not manage or write answers 403. Names are unique in a tenant, so choosing
one (creating or renaming a collection) is for callers who read every collection: anyone else
could learn a hidden collection's name from the 409 of a taken one, so they get a 403 whatever
the name. A grant names a group only once the caller is known to manage the collection.
Every change writes its audit entry in the transaction of the change; creating, changing or
deleting a collection then queues its webhook event. Moving a document or changing its
metadata bumps the tenant's corpus version, so scopes, keyword masks and cached answers that
depended on it are rebuilt.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.domain import GENERAL_COLLECTION, Role
from app.errors import Conflict, Forbidden, InvalidInput, NotFound
from app.services.audit import Actor
from app.services.collection_access import AccessResolver, CollectionAccess
from app.services.document_metadata import MetadataValue
from app.services.search_scope import collection_not_found
from app.services.stats import QuotaUse, TenantStats
from app.services.webhooks import DocumentEvents, EventType
from app.storage.collections import (
    AccessStore,
    CollectionChange,
    CollectionRecord,
    Grant,
    GroupMembers,
    GroupRecord,
    Permission,
    Visibility,
)

MAX_NAME = 64
# Names may not look like generated ids, so "id or name" never means two things.
_ID_LIKE = re.compile(r"(col|grp)_[0-9a-f]{12}")
DOCUMENT_NOT_FOUND = "document not found"
NAMING_NEEDS_EVERY_COLLECTION = (
    "choosing a collection's name needs read access to every collection of the tenant (names "
    "are unique across it, hidden ones too): ask an admin, signed in or with an unlimited key"
)


def checked_name(name: str, what: str) -> str:
    """A collection's or group's name: 1-64 characters, not blank, not shaped like an id, and
    usable as one segment of its URL."""
    # NFC, as document names are: "café" typed composed or decomposed is one name.
    stripped = unicodedata.normalize("NFC", name).strip()
    if not stripped or len(stripped) > MAX_NAME:
        raise InvalidInput(f"a {what} name has 1 to {MAX_NAME} characters")
    if _ID_LIKE.fullmatch(stripped):
        raise InvalidInput(f"a {what} name may not look like an id ({stripped!r})")
    # The name is one segment of /collections/{name} or /groups/{name}: a '/' splits it even
    # percent-encoded, and clients resolve '.' and '..' before sending, so neither reaches it.
    if "/" in stripped or not stripped.strip("."):
        raise InvalidInput(
            f"a {what} name may not contain '/' or be only dots ({stripped!r}): "
            f"/{what}s/<name> could not reach it"
        )
    return stripped


@dataclass(frozen=True)
class CollectionView:
    """A collection as its reader sees it: counts and the reader's own permission."""

    collection: CollectionRecord
    documents: int
    chunks: int
    permission: Permission


@dataclass(frozen=True)
class CollectionGrants:
    """A collection and who may read, write or manage it."""

    collection: CollectionRecord
    grants: list[Grant]


@dataclass(frozen=True)
class CollectionDocuments:
    """A collection's id and its documents' ids."""

    collection_id: str
    document_ids: list[str]


class CollectionService:
    """See the module docstring."""

    def __init__(
        self,
        store: AccessStore,
        resolver: AccessResolver,
        bump_corpus: Callable[[str], object],
        events: DocumentEvents,
    ) -> None:
        self.store = store
        self.resolver = resolver
        self._bump_corpus = bump_corpus
        self._events = events

    def access(
        self, *, tenant_id: str, user_id: str, role: Role, key_collections: tuple[str, ...] | None
    ) -> CollectionAccess:
        """The caller's permissions now."""
        return self.resolver.resolve(
            tenant_id=tenant_id, user_id=user_id, role=role, key_collections=key_collections
        )

    # --- collections ---

    def readable(self, access: CollectionAccess, id_or_name: str) -> CollectionRecord:
        """A collection the caller reads; NotFound (the same for missing and unreadable)."""
        found = self.store.find_collection(access.tenant_id, id_or_name)
        if found is None or access.permission(found.collection_id) is None:
            raise collection_not_found(id_or_name)
        return found

    def _managed(self, access: CollectionAccess, id_or_name: str) -> CollectionRecord:
        found = self.readable(access, id_or_name)
        if not access.can(collection_id=found.collection_id, needed="manage"):
            raise Forbidden(f"you may read collection {found.name!r} but not manage it")
        return found

    def create(
        self,
        access: CollectionAccess,
        actor: Actor,
        name: str,
        description: str,
        visibility: Visibility,
    ) -> CollectionRecord:
        """A new collection (the route lets only admins call it)."""
        _check_sees_every_name(access)
        name = checked_name(name, "collection")
        entry = actor.entry("collection.created", name=name, visibility=visibility)
        created = self.store.create_collection(
            access.tenant_id, name, description, visibility, entry
        )
        self._announce("collection.created", created, visibility=created.visibility)
        return created

    def readable_views(self, access: CollectionAccess) -> list[CollectionView]:
        """The collections the caller reads, by name, with counts and its permission."""
        graph_collections = [
            self.store.find_collection(access.tenant_id, cid) for cid in sorted(access.readable)
        ]
        counts = self.store.counts(access.tenant_id)
        views = [
            CollectionView(
                c, *counts.get(c.collection_id, (0, 0)), access.permissions[c.collection_id]
            )
            for c in graph_collections
            if c is not None
        ]
        return sorted(views, key=lambda v: v.collection.name)

    def view(self, access: CollectionAccess, id_or_name: str) -> CollectionView:
        """One readable collection with its counts."""
        found = self.readable(access, id_or_name)
        documents, chunks = self.store.counts(access.tenant_id).get(found.collection_id, (0, 0))
        return CollectionView(found, documents, chunks, access.permissions[found.collection_id])

    def change(
        self, access: CollectionAccess, actor: Actor, id_or_name: str, change: CollectionChange
    ) -> CollectionRecord:
        """Rename, re-describe or change the visibility of a managed collection."""
        found = self._managed(access, id_or_name)
        if change.name is not None:
            name = checked_name(change.name, "collection")
            if name != found.name:  # its own name, sent back with other changes, confirms nothing
                _check_sees_every_name(access)
            change = CollectionChange(name, change.description, change.visibility)
        entry = actor.entry("collection.changed", **change.values())
        changed = self.store.update_collection(access.tenant_id, found.collection_id, change, entry)
        # The event and the audit entry name the values as stored (a name trimmed, NFC).
        self._announce("collection.changed", changed, changes=change.values())
        return changed

    def delete(self, access: CollectionAccess, actor: Actor, id_or_name: str) -> bool:
        """Delete an empty managed collection; False (nothing done) when it holds documents."""
        found = self._managed(access, id_or_name)
        if found.collection_id == GENERAL_COLLECTION:
            raise Conflict("the general collection cannot be deleted")
        entry = actor.entry("collection.deleted", name=found.name)
        if not self.store.delete_collection(access.tenant_id, found.collection_id, entry):
            return False
        self._announce("collection.deleted", found, documents=0)
        return True

    def _announce(self, event_type: EventType, collection: CollectionRecord, **fields: Any) -> None:
        """Queue the collection's event for the tenant's webhooks."""
        self._events.collection(
            tenant_id=collection.tenant_id,
            event_type=event_type,
            collection_id=collection.collection_id,
            name=collection.name,
            **fields,
        )

    def documents_of(self, access: CollectionAccess, id_or_name: str) -> CollectionDocuments:
        """A managed collection's id and its documents' ids (to delete them first)."""
        found = self._managed(access, id_or_name)
        if found.collection_id == GENERAL_COLLECTION:
            raise Conflict("the general collection cannot be deleted")
        document_ids = self.store.document_ids(access.tenant_id, found.collection_id)
        return CollectionDocuments(found.collection_id, document_ids)

    # --- grants ---

    def grants(self, access: CollectionAccess, id_or_name: str) -> CollectionGrants:
        """A managed collection's grants."""
        found = self._managed(access, id_or_name)
        return CollectionGrants(found, self.store.grants(access.tenant_id, found.collection_id))

    def set_grants(
        self, access: CollectionAccess, actor: Actor, id_or_name: str, grants: Sequence[Grant]
    ) -> CollectionRecord:
        """Replace a managed collection's grants (in effect on every process's next request); a
        group's grant may name it by id or name (NotFound: no such group)."""
        found = self._managed(access, id_or_name)
        grants = [self._by_group_id(access.tenant_id, g) for g in grants]
        unique = {(g.principal_kind, g.principal_id): g for g in grants}
        if len(unique) != len(grants):
            raise InvalidInput("a group or user appears twice in grants")
        entry = actor.entry(
            "collection.access",
            grants=[f"{g.principal_kind}:{g.principal_id}:{g.permission}" for g in grants],
        )
        self.store.replace_grants(access.tenant_id, found.collection_id, list(grants), entry)
        return found

    def _by_group_id(self, tenant_id: str, grant: Grant) -> Grant:
        """The grant with its group named by id (a user's as it is)."""
        if grant.principal_kind != "group":
            return grant
        group = self.group(tenant_id=tenant_id, id_or_name=grant.principal_id).group
        return Grant("group", group.group_id, grant.permission)

    # --- groups (admins: the routes check the role) ---

    def create_group(
        self, *, tenant_id: str, actor: Actor, name: str, description: str
    ) -> GroupRecord:
        """A new group."""
        name = checked_name(name, "group")
        return self.store.create_group(
            tenant_id, name, description, actor.entry("group.created", name=name)
        )

    def group(self, *, tenant_id: str, id_or_name: str) -> GroupMembers:
        """A group and its members' user ids."""
        found = self.store.find_group(tenant_id, id_or_name)
        if found is None:
            raise NotFound("group not found")
        for listed in self.store.groups(tenant_id):
            if listed.group.group_id == found.group_id:
                return listed
        raise NotFound("group not found")

    def change_group(
        self,
        *,
        tenant_id: str,
        actor: Actor,
        id_or_name: str,
        name: str | None,
        description: str | None,
    ) -> GroupRecord:
        """Rename or re-describe a group."""
        found = self.group(tenant_id=tenant_id, id_or_name=id_or_name).group
        if name is not None:
            name = checked_name(name, "group")
        entry = actor.entry("group.changed", name=name or found.name)
        return self.store.update_group(tenant_id, found.group_id, name, description, entry)

    def delete_group(self, *, tenant_id: str, actor: Actor, id_or_name: str) -> None:
        """Delete a group, its memberships and its grants."""
        found = self.group(tenant_id=tenant_id, id_or_name=id_or_name).group
        self.store.delete_group(
            tenant_id, found.group_id, actor.entry("group.deleted", name=found.name)
        )

    def set_member(
        self, *, tenant_id: str, actor: Actor, id_or_name: str, user_id: str, member: bool
    ) -> bool:
        """Add or remove a member; False when nothing changed."""
        found = self.group(tenant_id=tenant_id, id_or_name=id_or_name).group
        action = "group.member_added" if member else "group.member_removed"
        entry = actor.entry(action, target_id=found.group_id, user_id=user_id)
        return self.store.set_member(tenant_id, found.group_id, user_id, member, entry)

    # --- documents ---

    def document_collection(self, access: CollectionAccess, *, document_id: str) -> str:
        """The collection of a document the caller reads; NotFound exactly as for a missing
        document otherwise."""
        collection_id = self.store.collection_of(access.tenant_id, document_id)
        if collection_id is None or access.permission(collection_id) is None:
            raise NotFound(DOCUMENT_NOT_FOUND)
        return collection_id

    def change_document(
        self,
        access: CollectionAccess,
        actor: Actor,
        *,
        document_id: str,
        uploaded_by: str | None,
        collection: str | None,
        metadata: dict[str, MetadataValue] | None,
    ) -> None:
        """Move a document and/or replace its metadata (no re-embedding): write on its
        collection (and, moving, on the target); a member only on their own uploads in a
        collection they write by its visibility alone."""
        current = self.document_collection(access, document_id=document_id)
        self._check_write(access, current, uploaded_by, actor.user_id)
        target = None
        if collection is not None:
            target = self.readable(access, collection).collection_id
            if not access.can(collection_id=target, needed="write"):
                raise Forbidden("you may not add documents to that collection")
        if target is not None and target != current:
            entry = actor.entry(
                "document.moved", target_id=document_id, collection=target, previous=current
            )
            self.store.set_document(access.tenant_id, document_id, entry, collection_id=target)
        if metadata is not None:
            entry = actor.entry("document.metadata", target_id=document_id, keys=sorted(metadata))
            self.store.set_document(access.tenant_id, document_id, entry, metadata=metadata)
        self._bump_corpus(access.tenant_id)

    def upload_target(self, access: CollectionAccess, collection: str | None) -> str:
        """The collection an upload goes to (default `general`), which the caller must write."""
        target = self.readable(access, collection or GENERAL_COLLECTION).collection_id
        if not access.can(collection_id=target, needed="write"):
            raise Forbidden("you may not add documents to that collection")
        return target

    def check_replace(
        self, access: CollectionAccess, target: str, uploaded_by: str | None, *, user_id: str
    ) -> None:
        """Forbidden unless the caller may replace the document of that uploader in `target`
        (a collection it writes: only a name already there is replaced)."""
        self._check_write(access, target, uploaded_by, user_id)

    @staticmethod
    def _check_write(
        access: CollectionAccess, collection_id: str, uploaded_by: str | None, user_id: str | None
    ) -> None:
        if not access.can(collection_id=collection_id, needed="write"):
            raise Forbidden("you may read this document but not change it")
        if not access.may_change_any(collection_id) and uploaded_by != user_id:
            raise Forbidden("you can change only documents you uploaded (a write grant can)")

    def check_may_delete(
        self, access: CollectionAccess, *, document_id: str, uploaded_by: str | None, user_id: str
    ) -> None:
        """NotFound for an unreadable document, Forbidden for one the caller may not delete."""
        self._check_write(
            access, self.document_collection(access, document_id=document_id), uploaded_by, user_id
        )


def _check_sees_every_name(access: CollectionAccess) -> None:
    """Forbidden, whatever the name, unless the caller reads every collection: a taken name's
    409 would otherwise confirm a collection it may not see."""
    if not access.reads_everything:
        raise Forbidden(NAMING_NEEDS_EVERY_COLLECTION)


def stats_in_reach(stats: TenantStats, store: AccessStore, access: CollectionAccess) -> TenantStats:
    """/stats as the caller may see it: a caller who does not read every collection gets the
    documents, chunks and their quota use of the collections it reads (the rest of the tenant's
    documents are not counted anywhere it can see), and no answer-cache figures: they count the
    questions asked of every collection."""
    if access.reads_everything:
        return stats
    usage = store.usage_in(access.tenant_id, access.readable)
    quotas = dict(stats.quotas)
    for name, used in (
        ("documents", usage.documents),
        ("chunks", usage.chunks),
        ("stored_bytes", usage.stored_bytes),
        ("ocr_pages", usage.ocr_pages),
    ):
        if name in quotas:
            quotas[name] = QuotaUse(used, quotas[name].limit)
    return replace(stats, documents=usage.documents, chunks=usage.chunks, cache=None, quotas=quotas)
