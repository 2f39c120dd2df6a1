"""Who sees an evaluation set or run, and what of it: a set whole or not at all, a run only by
those who read every collection it read (a deleted collection asks nothing, a run from before
runs recorded their collections only those who read everything), and inside a run a document
moved out of the viewer's sight withheld wherever it is named."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from app.jobs.evaluation_runs import RunRecord
from app.services.collection_access import CollectionAccess
from app.services.evaluation_access import QualityViewer
from app.storage.evaluation_sets import EvaluationSet

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, tzinfo=UTC)
COLLECTIONS = {"general": "general", "board": "board"}
WHERE = {"doc-public": "general", "doc-board": "board"}  # document -> its collection now


def viewer(reads: tuple[str, ...]) -> QualityViewer:
    access = CollectionAccess("t1", 1, dict.fromkeys(reads, "read"), COLLECTIONS)
    return QualityViewer(access, lambda d: d in WHERE and WHERE[d] not in reads)


def expected(document_id: str) -> dict[str, Any]:
    return {"document_id": document_id, "source": f"{document_id}.txt", "page": 1}


def a_set(*documents: str) -> EvaluationSet:
    items = [{"question": "Q?", "expected": [expected(d)], "answerable": True} for d in documents]
    return EvaluationSet("s1", "t1", "set", len(items), NOW, "u1", items)


def a_run(collections: tuple[str, ...] | None, results: list[dict[str, Any]]) -> RunRecord:
    return RunRecord(
        "r1",
        "t1",
        "s1",
        "done",
        False,
        len(results),
        len(results),
        NOW,
        NOW,
        documents={d: {"source": f"{d}.txt", "sha256": "x"} for d in WHERE},
        results=results,
        collections=collections,
    )


def scored(question: str, gold: str, retrieved: list[str]) -> dict[str, Any]:
    return {
        "question": question,
        "answerable": True,
        "expected": [expected(gold)],
        "retrieved": [{"document_id": d, "source": f"{d}.txt", "page": 1} for d in retrieved],
        "document": {"hit@1": 1.0, "hit@5": 1.0, "mrr@10": 1.0},
        "page": None,
        "latency_ms": 3.0,
        "answer": {"refused": False, "cited": [f"{d}#1" for d in retrieved], "answer_id": "a"},
    }


def test_a_set_is_seen_only_by_those_who_read_every_document_it_expects() -> None:
    assert viewer(("general",)).sees_set(a_set("doc-public"))
    assert not viewer(("general",)).sees_set(a_set("doc-public", "doc-board"))
    assert viewer(("general", "board")).sees_set(a_set("doc-public", "doc-board"))
    # A deleted document hides nothing: nobody reads it.
    assert viewer(("general",)).sees_set(a_set("doc-deleted"))


def test_a_run_is_seen_only_by_those_who_read_every_collection_it_read() -> None:
    narrow, wide = viewer(("general",)), viewer(("general", "board"))
    assert narrow.sees_run(a_run(("general",), []))
    assert not narrow.sees_run(a_run(("board", "general"), []))
    assert wide.sees_run(a_run(("board", "general"), []))
    assert narrow.sees_run(a_run(("general", "deleted-collection"), []))
    # Made before runs recorded their collections: only those who read everything.
    assert wide.sees_run(a_run(None, [])) and not narrow.sees_run(a_run(None, []))


def test_a_document_out_of_sight_is_withheld_wherever_a_run_names_it() -> None:
    results = [
        scored("Where is the public note?", "doc-public", ["doc-public", "doc-board"]),
        scored("What do the board minutes say?", "doc-board", ["doc-board"]),
    ]
    run = a_run(("general",), results)
    shown = viewer(("general",)).redacted(run)
    text = json.dumps(shown.results) + json.dumps(shown.documents)
    assert "doc-board" not in text and "board minutes" not in text
    first, second = shown.results
    assert [h.get("withheld", False) for h in first["retrieved"]] == [False, True]
    assert first["answer"]["cited"] == ["doc-public#1"]
    assert second == {
        "withheld": True,
        "answerable": True,
        "document": {"hit@1": 1.0, "hit@5": 1.0, "mrr@10": 1.0},
        "page": None,
        "latency_ms": 3.0,
    }
    assert list(shown.documents) == ["doc-public"]
    assert run.results == results  # the stored run is untouched
    assert viewer(("general", "board")).redacted(run) is run
