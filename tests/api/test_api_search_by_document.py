"""/search with `group=document`: a long document takes one place, with the count of its other
ranked chunks and their pages, k distinct documents come back, and tenants stay apart."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.api.harness import ApiFactory, ApiHarness, ApiUser, assert_error_body
from tests.ingestion.ingestion_builders import pdf_from_pages

pytestmark = pytest.mark.integration

QUERY = "centrifugal pump impeller seal"
MANUAL_PAGES = 6
NOTES = 7  # one-chunk documents besides the manual


def manual_pdf(path: Path) -> bytes:
    """A manual whose every page is about the pump's impeller seal (about two chunks a page)."""
    pages = [
        [
            f"Page {page} step {line}: check the centrifugal pump impeller seal, then the pump "
            f"bearing and the seal housing."
            for line in range(1, 13)
        ]
        for page in range(1, MANUAL_PAGES + 1)
    ]
    return pdf_from_pages(path, pages).read_bytes()


def note(number: int) -> bytes:
    return (
        f"Note {number}: the garden pump by shed {number} was serviced; its seal and impeller "
        f"were replaced and it waters bed {number} again."
    ).encode()


@pytest.fixture(scope="module")
def harness(api_factory: ApiFactory) -> ApiHarness:
    # Small arms, so the manual alone fills the first candidates and the pool must widen.
    return api_factory(dense_candidates=6, keyword_candidates=6)


@dataclass
class Tenants:
    """Two tenants' users and what they uploaded (`manual`: alice's manual's finished job)."""

    alice: ApiUser
    bob: ApiUser
    manual: dict[str, Any]
    alice_docs: set[str]
    bob_docs: set[str]


@pytest.fixture(scope="module")
def corpus(harness: ApiHarness, tmp_path_factory: pytest.TempPathFactory) -> Tenants:
    folder = tmp_path_factory.mktemp("by-document")
    alice = harness.add_user("pumps-a")
    bob = harness.add_user("pumps-b")
    manual = harness.upload_and_wait(alice, "pump-manual.pdf", manual_pdf(folder / "a.pdf"))
    assert manual["status"] == "done" and manual["pages"] == MANUAL_PAGES, manual
    assert manual["chunks_indexed"] >= 2 * MANUAL_PAGES - 1, manual
    alice_docs = {manual["document_id"]}
    for number in range(1, NOTES + 1):
        job = harness.upload_and_wait(alice, f"note-{number}.txt", note(number))
        assert job["status"] == "done", job
        alice_docs.add(job["document_id"])
    # The other tenant holds the same manual under the same name and a closer match.
    bob_docs = set()
    for name, content in (
        ("pump-manual.pdf", manual_pdf(folder / "b.pdf")),
        ("rival.txt", f"{QUERY}. {QUERY}.".encode()),
    ):
        job = harness.upload_and_wait(bob, name, content)
        assert job["status"] == "done", job
        bob_docs.add(job["document_id"])
    return Tenants(alice, bob, manual, alice_docs, bob_docs)


def test_a_long_document_takes_one_place_with_the_count_of_its_other_chunks(
    harness: ApiHarness, corpus: Tenants
) -> None:
    alice, manual = corpus.alice, corpus.manual
    by_chunk = harness.search(alice, QUERY, k=8)
    assert by_chunk["group"] == "chunk"
    chunk_docs = [r["document_id"] for r in by_chunk["results"]]
    assert chunk_docs.count(manual["document_id"]) >= 2  # what grouping is for
    assert all(r["other_chunks"] is None and r["other_pages"] is None for r in by_chunk["results"])

    body = harness.search(alice, QUERY, k=8, group="document")
    assert body["group"] == "document"
    results = body["results"]
    docs = [r["document_id"] for r in results]
    assert docs.count(manual["document_id"]) == 1
    top = results[docs.index(manual["document_id"])]
    # The pool widened to every chunk of the tenant: all the manual's other chunks are counted.
    assert top["other_chunks"] == manual["chunks_indexed"] - 1
    assert top["page"] not in top["other_pages"]
    assert len(set(top["other_pages"])) == len(top["other_pages"])
    assert {top["page"], *top["other_pages"]} == set(range(1, MANUAL_PAGES + 1))
    notes = [r for r in results if r["document_id"] != manual["document_id"]]
    assert notes and all(r["other_chunks"] == 0 and r["other_pages"] == [] for r in notes)
    assert [r["rank"] for r in results] == list(range(1, len(results) + 1))


def test_k_distinct_documents_come_back_while_the_tenant_has_them(
    harness: ApiHarness, corpus: Tenants
) -> None:
    alice = corpus.alice
    for k in (3, 8):
        docs = [
            r["document_id"] for r in harness.search(alice, QUERY, k=k, group="document")["results"]
        ]
        assert len(docs) == k and len(set(docs)) == k
    # More than the tenant has: each of its documents once.
    docs = [
        r["document_id"] for r in harness.search(alice, QUERY, k=20, group="document")["results"]
    ]
    assert sorted(docs) == sorted(corpus.alice_docs)


def test_another_tenants_documents_never_appear(harness: ApiHarness, corpus: Tenants) -> None:
    alice, bob = corpus.alice, corpus.bob
    alice_docs, bob_docs = corpus.alice_docs, corpus.bob_docs
    for k in (2, 20):
        seen_by_alice = harness.search(alice, QUERY, k=k, group="document")["results"]
        assert {r["document_id"] for r in seen_by_alice} <= alice_docs
        seen_by_bob = harness.search(bob, QUERY, k=k, group="document")["results"]
        assert {r["document_id"] for r in seen_by_bob} <= bob_docs
    assert {r["document_id"] for r in seen_by_bob} == bob_docs


def test_an_unknown_grouping_is_a_422_with_the_error_body(
    harness: ApiHarness, corpus: Tenants
) -> None:
    alice = corpus.alice
    for group in ("page", "", None, 1, ["document"]):
        response = harness.client.post(
            "/search", json={"query": QUERY, "group": group}, headers=alice.headers
        )
        error = assert_error_body(response, 422, "validation_error")
        assert "group" in error["message"]


def test_the_schema_documents_the_grouping(harness: ApiHarness) -> None:
    schemas = harness.client.get("/openapi.json").json()["components"]["schemas"]
    group = schemas["SearchIn"]["properties"]["group"]
    assert group["default"] == "chunk"
    assert group["enum"] == ["chunk", "document"]
    assert "other_chunks" in schemas["SearchResultOut"]["properties"]
