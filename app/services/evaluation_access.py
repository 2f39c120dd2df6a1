"""Who sees which evaluation sets and runs, and what of them.

A set is seen whole or not at all: only by callers who read every document its items expect (its
questions are about those documents); to anyone else it is missing. A run records the
collections its starter's credential read when it started and never searches beyond them; only
callers who now read every one of them see it (its aggregate is computed over them), to anyone
else it is missing. What was deleted since cannot be asked who reads it: a set expecting a
deleted document, or a run that read a deleted collection, is seen only by an admin who reads
every collection and by whoever made it (it may have been restricted, and its questions and
file names must not reach a member who never read it). Within a run a caller sees, what names
a document moved since into a collection they do not read is withheld: the item's question and
expected pages, the passage retrieved, the page cited, the file in the corpus snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from app.services.collection_access import reads_everything_ever

if TYPE_CHECKING:
    from app.domain import Role
    from app.jobs.evaluation_runs import RunRecord
    from app.services.collection_access import CollectionAccess
    from app.services.search_scope import SearchScopes
    from app.storage.evaluation_sets import EvaluationSet

WITHHELD: dict[str, Any] = {"withheld": True}


@dataclass(frozen=True)
class QualityViewer:
    """One caller's view of the tenant's sets and runs."""

    access: CollectionAccess
    # Whether a document of the tenant exists and the caller may not read it now.
    hidden: Callable[[str], bool]
    # Whether a document of the tenant exists (one deleted since does not).
    exists: Callable[[str], bool]
    role: Role
    user_id: str | None  # the caller's (an API key's owner's)

    @classmethod
    def of(
        cls, access: CollectionAccess, scopes: SearchScopes, *, role: Role, user_id: str | None
    ) -> QualityViewer:
        """The view of a caller with this access, role and user id."""
        return cls(
            access,
            scopes.hidden_documents(access),
            scopes.existing_documents(access.tenant_id),
            role,
            user_id,
        )

    @property
    def sees_all(self) -> bool:
        """Whether the caller sees every set and run: an admin reading every collection."""
        return reads_everything_ever(self.role, self.access)

    def sees_set(self, found: EvaluationSet) -> bool:
        """Whether the caller reads every document the set expects (one deleted since: only
        if they made the set)."""
        if self.sees_all:
            return True
        expected = [e["document_id"] for item in found.items for e in item["expected"]]
        if any(self.hidden(document_id) for document_id in expected):
            return False
        return all(self.exists(d) for d in expected) or self._made(found.created_by)

    def sees_run(self, run: RunRecord) -> bool:
        """Whether the caller reads every collection the run read (one deleted since, or a run
        from before runs recorded them: only if they started it)."""
        if self.sees_all:
            return True
        if run.collections is None:
            return self.access.reads_everything and self._made(run.created_by)
        existing = {c for c in run.collections if c in self.access.all_collections}
        if not existing <= self.access.readable:
            return False
        return len(existing) == len(set(run.collections)) or self._made(run.created_by)

    def _made(self, created_by: str | None) -> bool:
        return created_by is not None and created_by == self.user_id

    def redacted(self, run: RunRecord) -> RunRecord:
        """The run with what names a document the caller may not read now withheld."""
        if self.sees_all:
            return run
        documents = {d: v for d, v in run.documents.items() if not self.hidden(d)}
        return replace(run, documents=documents, results=[self._item(r) for r in run.results])

    def _item(self, result: dict[str, Any]) -> dict[str, Any]:
        if any(self.hidden(e["document_id"]) for e in result.get("expected", [])):
            kept = ("answerable", "document", "page", "latency_ms", "retrieval_ms", "error")
            return {**WITHHELD, **{k: result[k] for k in kept if k in result}}
        shown = dict(result)
        if "retrieved" in shown:
            shown["retrieved"] = [
                dict(WITHHELD) if self.hidden(hit["document_id"]) else hit
                for hit in shown["retrieved"]
            ]
        if "answer" in shown:
            cited = [c for c in shown["answer"]["cited"] if not self.hidden(c.split("#")[0])]
            shown["answer"] = {**shown["answer"], "cited": cited}
        return shown
