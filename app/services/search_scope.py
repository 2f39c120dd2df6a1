"""A request's search scope: the caller's readable collections, narrowed by the collections
and filters it asked for, as the documents (and pages) retrieval may see.

The documents each collection holds and their fields are read once per corpus version (a move
or a metadata change bumps it), so resolving a scope reads no table beyond the two version
lookups. Asking for a collection the caller cannot read looks exactly like asking for one that
does not exist.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.errors import NotFound
from app.memory import HotMap
from app.retrieval.scope import ChunkOwners, SearchScope, scope_key
from app.services.collection_access import CollectionAccess
from app.services.filters import Filter, parse_filter
from app.storage.collections import AccessStore, DocumentFacts


def collection_not_found(name: str) -> NotFound:
    """The one error for a collection that is missing or that the caller may not read."""
    return NotFound(f"collection not found: {name}")


@dataclass(frozen=True)
class Catalog:
    """A tenant's documents at one corpus version, as filters read them."""

    version: int
    documents: tuple[DocumentFacts, ...]


def content_type(source: str) -> str:
    """A document's media type, from its file name."""
    guessed, _ = mimetypes.guess_type(source)
    return guessed or "application/octet-stream"


def fields_of(facts: DocumentFacts, collection_name: str | None) -> dict[str, Any]:
    """The built-in fields of a document (several names of one thing as a tuple)."""
    return {
        "source": facts.source,
        "document_id": facts.document_id,
        "collection": (facts.collection_id, collection_name or facts.collection_id),
        "content_type": content_type(facts.source),
        "language": facts.language,
        "uploaded_at": facts.uploaded_at,
        "uploaded_by": tuple(v for v in (facts.uploaded_by, facts.uploaded_by_name) if v) or None,
    }


class SearchScopes:
    """Resolves `SearchScope`s; see the module docstring."""

    def __init__(
        self,
        store: AccessStore,
        corpus_version: Callable[[str], int],
        owners: Callable[[str], ChunkOwners],
        hot_tenants: int = 64,
    ) -> None:
        self._store = store
        self._corpus_version = corpus_version
        self._owners = owners
        self._catalogs: HotMap[str, Catalog] = HotMap(hot_tenants)

    def catalog(self, tenant_id: str) -> Catalog:
        """The tenant's documents at its current corpus version."""
        version = self._corpus_version(tenant_id)
        cached = self._catalogs.get(tenant_id)
        if cached is not None and cached.version == version:
            return cached
        catalog = Catalog(version, tuple(self._store.catalog(tenant_id)))
        self._catalogs.put(tenant_id, catalog)
        return catalog

    def readable_documents(self, access: CollectionAccess) -> Callable[[str], bool]:
        """Whether a document id is one the caller reads now (a missing one is not)."""
        if access.reads_everything:
            return lambda _document_id: True
        where = {d.document_id: d.collection_id for d in self.catalog(access.tenant_id).documents}
        readable = access.readable
        return lambda document_id: where.get(document_id) in readable

    def existing_documents(self, tenant_id: str) -> Callable[[str], bool]:
        """Whether a document id is one the tenant has now (a deleted one is not)."""
        known = {d.document_id for d in self.catalog(tenant_id).documents}
        return known.__contains__

    def hidden_documents(self, access: CollectionAccess) -> Callable[[str], bool]:
        """Whether a document id is one of the tenant's that the caller may not read now (a
        deleted one is not hidden: nobody reads it, and what was recorded of it stays)."""
        if access.reads_everything:
            return lambda _document_id: False
        where = {d.document_id: d.collection_id for d in self.catalog(access.tenant_id).documents}
        readable = access.readable
        return lambda document_id: document_id in where and where[document_id] not in readable

    def chosen_collections(
        self, access: CollectionAccess, requested: Sequence[str] | None
    ) -> frozenset[str]:
        """The readable collections a request asked for (all readable ones when it named none);
        NotFound, the same for both, naming one that is missing or not readable."""
        if requested is None:
            return access.readable
        by_name = {name: cid for cid, name in access.all_collections.items()}
        chosen = set()
        for wanted in requested:
            cid = wanted if wanted in access.all_collections else by_name.get(wanted)
            if cid is None or cid not in access.readable:
                raise collection_not_found(wanted)
            chosen.add(cid)
        return frozenset(chosen)

    def resolve(
        self,
        access: CollectionAccess,
        collections: Sequence[str] | None = None,
        filters: Filter | None = None,
    ) -> SearchScope:
        """The scope of one request: never wider than what the caller may read."""
        tenant_id = access.tenant_id
        chosen = self.chosen_collections(access, collections)
        key = scope_key(
            ["c:" + ",".join(sorted(chosen)), "f:" + (filters.canonical if filters else "")]
        )
        if filters is None and chosen == frozenset(access.all_collections):
            return SearchScope(key="all")
        documents = [d for d in self.catalog(tenant_id).documents if d.collection_id in chosen]
        if filters is None:
            return SearchScope(frozenset(d.document_id for d in documents), key=key)
        names = access.all_collections
        if not filters.uses("page"):
            kept = frozenset(
                d.document_id
                for d in documents
                if filters.matches(field_values(fields_of(d, names.get(d.collection_id)), d))
            )
            return SearchScope(kept, key=key)
        return self._page_scope(tenant_id, documents, names, filters, key)

    def _page_scope(
        self,
        tenant_id: str,
        documents: list[DocumentFacts],
        names: dict[str, str] | Any,
        filters: Filter,
        key: str,
    ) -> SearchScope:
        """A filter on pages: each (document, page) judged once, the chunks of those kept."""
        facts = {d.document_id: d for d in documents}
        owners = self._owners(tenant_id)
        verdicts: dict[tuple[int, int], bool] = {}
        chunks: set[str] = set()
        kept_documents: set[str] = set()
        for position, chunk_id in enumerate(owners.chunk_ids):
            doc_index = int(owners.document_of[position])
            document_id = owners.document_ids[doc_index]
            document = facts.get(document_id)
            if document is None:
                continue
            page = int(owners.page_of[position])
            verdict = verdicts.get((doc_index, page))
            if verdict is None:
                fields = fields_of(document, names.get(document.collection_id))
                fields["page"] = page
                verdict = filters.matches(field_values(fields, document))
                verdicts[(doc_index, page)] = verdict
            if verdict:
                chunks.add(chunk_id)
                kept_documents.add(document_id)
        return SearchScope(frozenset(kept_documents), frozenset(chunks), key=key)


def field_values(fields: dict[str, Any], facts: DocumentFacts) -> Callable[[str], Any]:
    """What a filter reads of a document: its built-in `fields` (`fields_of`, with `page` when
    judged per page) first, then its own metadata (None for a field it lacks)."""

    def value_of(field: str) -> Any:
        if field in fields:
            return fields[field]
        return facts.metadata.get(field)

    return value_of


def request_scope(
    scopes: SearchScopes,
    access: CollectionAccess,
    collections: Sequence[str] | None,
    filters: Any,
) -> SearchScope:
    """The scope of a request body's `collections` and `filters` (InvalidInput for a bad
    filter, NotFound for a collection the caller cannot read). An empty filter object sets no
    condition, as leaving `filters` out does."""
    checked = None if filters is None or filters == {} else parse_filter(filters)
    return scopes.resolve(access, collections, checked)
