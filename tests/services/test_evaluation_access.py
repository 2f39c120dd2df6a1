"""Who sees an evaluation set or run, and what of it: a set whole or not at all, a run only by
those who read every collection it read (what was deleted since, and a run from before runs
recorded their collections, only an admin reading everything and whoever made it), and inside a
run a document moved out of the viewer's sight withheld wherever it is named."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from app.domain import Role
from app.jobs.evaluation_runs import RunRecord
from app.services.collection_access import CollectionAccess
from app.services.evaluation_access import QualityViewer
from app.storage.evaluation_sets import EvaluationSet

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, tzinfo=UTC)
COLLECTIONS = {"general": "general", "board": "board"}
WHERE = {"doc-public": "general", "doc-board": "board"}  # document -> its collection now
MAKER = "u1"  # who made the sets and started the runs


def viewer(reads: tuple[str, ...], role: Role = "member", user_id: str = "u2") -> QualityViewer:
    access = CollectionAccess("t1", 1, dict.fromkeys(reads, "read"), COLLECTIONS)
    hidden = lambda d: d in WHERE and WHERE[d] not in reads  # noqa: E731
    return QualityViewer(access, hidden, WHERE.__contains__, role, user_id)


def expected(document_id: str) -> dict[str, Any]:
    return {"document_id": document_id, "source": f"{document_id}.txt", "page": 1}


def a_set(*documents: str) -> EvaluationSet:
    items = [{"question": "Q?", "expected": [expected(d)], "answerable": True} for d in documents]
    return EvaluationSet("s1", "t1", "set", len(items), NOW, MAKER, items)


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
        created_by=MAKER,
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
    # A deleted document cannot be asked who read it: it may have been restricted.
    wide = ("general", "board")
    assert not viewer(wide).sees_set(a_set("doc-public", "doc-deleted"))
    assert viewer(("general",), user_id=MAKER).sees_set(a_set("doc-public", "doc-deleted"))
    assert viewer(wide, role="admin").sees_set(a_set("doc-deleted"))
    assert not viewer(("general",), role="admin").sees_set(a_set("doc-board"))


def test_a_run_is_seen_only_by_those_who_read_every_collection_it_read() -> None:
    narrow, wide = viewer(("general",)), viewer(("general", "board"))
    assert narrow.sees_run(a_run(("general",), []))
    assert not narrow.sees_run(a_run(("board", "general"), []))
    assert wide.sees_run(a_run(("board", "general"), []))
    # A deleted collection cannot be asked who read it: only an admin reading everything and
    # the run's starter see the run.
    gone = a_run(("general", "deleted-collection"), [])
    assert not narrow.sees_run(gone) and not wide.sees_run(gone)
    assert viewer(("general",), user_id=MAKER).sees_run(gone)
    assert viewer(("general", "board"), role="admin").sees_run(gone)
    # Made before runs recorded their collections: the same, its starter reading everything.
    old = a_run(None, [])
    assert not wide.sees_run(old) and not narrow.sees_run(old)
    assert viewer(("general", "board"), user_id=MAKER).sees_run(old)
    assert not viewer(("general",), user_id=MAKER).sees_run(old)
    assert viewer(("general", "board"), role="admin").sees_run(old)


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
    assert viewer(("general", "board"), role="admin").redacted(run) is run
