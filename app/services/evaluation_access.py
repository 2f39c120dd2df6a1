"""Who sees which evaluation sets and runs, and what of them.

A set is seen whole or not at all: only by callers who read every document its items expect (its
questions are about those documents); to anyone else it is missing. A run records the
collections its starter's credential read when it started and never searches beyond them; only
callers who now read every one of them see it (its aggregate is computed over them), to anyone
else it is missing. Within a run a caller sees, what names a document moved since into a
collection they do not read is withheld: the item's question and expected pages, the passage
retrieved, the page cited, the file in the corpus snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.jobs.evaluation_runs import RunRecord
    from app.services.collection_access import CollectionAccess
    from app.storage.evaluation_sets import EvaluationSet

WITHHELD: dict[str, Any] = {"withheld": True}


@dataclass(frozen=True)
class QualityViewer:
    """One caller's view of the tenant's sets and runs."""

    access: CollectionAccess
    # Whether a document of the tenant exists and the caller may not read it now.
    hidden: Callable[[str], bool]

    @property
    def sees_all(self) -> bool:
        """Whether the caller sees every set and run (reads every collection)."""
        return self.access.reads_everything

    def sees_set(self, found: EvaluationSet) -> bool:
        """Whether the caller reads every document the set expects."""
        return not any(
            self.hidden(expected["document_id"])
            for item in found.items
            for expected in item["expected"]
        )

    def sees_run(self, run: RunRecord) -> bool:
        """Whether the caller reads every collection the run read (that still exists)."""
        if run.collections is None:
            return self.access.reads_everything
        existing = {c for c in run.collections if c in self.access.all_collections}
        return existing <= self.access.readable

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
