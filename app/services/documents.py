"""Documents of a tenant: who may change one, list, show and delete them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from app.domain import ListedPage
from app.errors import Forbidden, InvalidInput, or_not_found
from app.services.audit import Actor
from app.services.indexing import DocumentDeps, documents_lock
from app.storage.audit import AuditEntry
from app.storage.documents import DocumentRecord, DocumentStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Uploader:
    """Who uploads or deletes: a member changes only documents they uploaded, an admin any."""

    actor: Actor
    may_change_any: bool

    def check_may_change(self, document: DocumentRecord, verb: str) -> None:
        """Forbidden unless this uploader may replace or delete the document."""
        if not self.may_change_any and document.uploaded_by != self.actor.user_id:
            raise Forbidden(
                f"you can {verb} only documents you uploaded; {document.source!r} was uploaded "
                "by someone else (an admin can)"
            )


def document_named(
    documents: DocumentStore,
    *,
    tenant_id: str,
    document_id: str | None,
    source: str | None,
    readable: Callable[[str], bool],
) -> DocumentRecord | None:
    """The readable document a client names by id or by file name; None when there is none.

    A name is unique within a collection, not within the tenant: a name the caller reads in
    several collections is InvalidInput (name it by id). Documents it may not read are never
    counted, so the answer is the same whether or not another collection holds the name.
    """
    if document_id:
        found = documents.get(tenant_id, document_id)
        return found if found is not None and readable(found.document_id) else None
    if not source:
        return None
    named = [d for d in documents.named(tenant_id, source) if readable(d.document_id)]
    if len(named) > 1:
        raise InvalidInput(
            f"{len(named)} of your collections hold a document named {source!r}: name it by "
            "its document_id"
        )
    return named[0] if named else None


def list_documents(
    deps: DocumentDeps,
    *,
    tenant_id: str,
    limit: int,
    offset: int,
    collections: Collection[str] | None = None,
) -> ListedPage[DocumentRecord]:
    """One page of the tenant's documents (of these collections, when given) and their count."""
    return ListedPage(
        deps.documents.list(tenant_id, limit, offset, collections),
        deps.documents.count(tenant_id, collections),
    )


def get_document(deps: DocumentDeps, *, tenant_id: str, document_id: str) -> DocumentRecord:
    """The tenant's document; NotFound whether missing or another tenant's."""
    return or_not_found(deps.documents.get(tenant_id, document_id), "document not found")


def delete_document(
    deps: DocumentDeps, *, tenant_id: str, document_id: str, uploader: Uploader | None = None
) -> None:
    """Remove a document's chunks and record; no search or answer reaches it afterwards.

    NotFound when missing; Forbidden (nothing removed) when the uploader may not delete it.
    """
    with documents_lock(deps, tenant_id=tenant_id):
        found = or_not_found(deps.documents.get(tenant_id, document_id), "document not found")
        audit = None
        if uploader is not None:
            uploader.check_may_change(found, "delete")
            audit = uploader.actor.entry(
                "document.deleted", target_id=document_id, source=found.source
            )
        _remove(deps, found, audit)
    deps.cache.invalidate_tenant(tenant_id)
    deps.refresh_keywords(tenant_id)
    _deleted(deps, found)


def delete_documents(
    deps: DocumentDeps, *, tenant_id: str, document_ids: Sequence[str], actor: Actor
) -> int:
    """Remove several documents as `delete_document` removes one, each with its audit entry,
    and refresh the tenant's answers and keyword index once; how many existed. The caller has
    checked that `actor` may delete them (a collection's deletion)."""
    removed = []
    with documents_lock(deps, tenant_id=tenant_id):
        for document_id in document_ids:
            found = deps.documents.get(tenant_id, document_id)
            if found is None:
                continue  # deleted meanwhile
            audit = actor.entry("document.deleted", target_id=document_id, source=found.source)
            _remove(deps, found, audit)
            removed.append(found)
    if removed:
        deps.cache.invalidate_tenant(tenant_id)
        deps.refresh_keywords(tenant_id)
    for found in removed:
        _deleted(deps, found)
    return len(removed)


def _remove(deps: DocumentDeps, found: DocumentRecord, audit: AuditEntry | None) -> None:
    """Remove one document's chunks, record and pages (under the documents lock)."""
    tenant_id, document_id = found.tenant_id, found.document_id
    removed = deps.corpus.delete_document(tenant_id=tenant_id, document_id=document_id)
    deps.documents.delete(tenant_id, document_id, audit)
    deps.originals.drop(tenant_id=tenant_id, document_id=document_id)
    log.info("document deleted", extra={"document_id": document_id, "chunks": removed})


def _deleted(deps: DocumentDeps, found: DocumentRecord) -> None:
    """Tell the webhooks a document was deleted."""
    if deps.events is not None:
        deps.events.document(
            tenant_id=found.tenant_id,
            event_type="document.deleted",
            document_id=found.document_id,
            source=found.source,
            status="deleted",
            collection_id=found.collection_id,
        )
