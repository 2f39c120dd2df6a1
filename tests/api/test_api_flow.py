"""Upload -> poll -> search -> query -> delete for two tenants at once, isolation at every step."""

from __future__ import annotations

import json
from typing import Any

import pytest

from testkit.builders import pdf_document, text_document
from tests.api.harness import ApiHarness, ApiUser, sse_events

pytestmark = pytest.mark.integration

# Each tenant's documents carry markers no other tenant's text contains.
A_FILES = {
    "reactor.txt": text_document(
        "The Zephyr-9 reactor coolant is replaced every 17 months by the AMBERFALCON crew.",
        "AMBERFALCON inspections log the coolant temperature at 340 kelvin.",
    ),
    "shared-name.pdf": pdf_document(
        "Cover page of the AMBERFALCON handbook.",
        "The AMBERFALCON evacuation meeting point is the north car park.",
    ),
}
B_FILES = {
    "turbine.txt": text_document(
        "The Quasar-4 turbine blades are inspected every 3 weeks by the BLUEHERON team.",
        "BLUEHERON keeps spare blades in hangar 12.",
    ),
    "shared-name.pdf": pdf_document("The BLUEHERON evacuation meeting point is the south gate."),
}
A_MARK, B_MARK = "AMBERFALCON", "BLUEHERON"
QUESTIONS = [
    "How often is the reactor coolant replaced?",
    "When are the turbine blades inspected?",
    "Where is the evacuation meeting point?",
    "What temperature is logged during inspections?",
    "Where are the spare blades kept?",
    "AMBERFALCON",
    "BLUEHERON",
]


def _no_text_of(mark: str, payload: Any) -> None:
    assert mark.lower() not in json.dumps(payload, ensure_ascii=False).lower(), payload


def _stream_events(api: ApiHarness, user: ApiUser, question: str) -> list[tuple[str, Any]]:
    response = api.client.post("/query/stream", json={"question": question}, headers=user.headers)
    return sse_events(response)


@pytest.fixture(scope="module")
def tenants(api: ApiHarness) -> tuple[ApiUser, ApiUser]:
    return api.add_user("flow-a"), api.add_user("flow-b")


def test_two_tenants_full_flow_with_isolation(
    api: ApiHarness, tenants: tuple[ApiUser, ApiUser]
) -> None:
    a, b = tenants
    own = {a.tenant: (a, A_FILES, A_MARK, B_MARK), b.tenant: (b, B_FILES, B_MARK, A_MARK)}

    # 1. Upload for both tenants before waiting on any job: the workers interleave them.
    accepted: dict[str, list[Any]] = {a.tenant: [], b.tenant: []}
    for user, files, _, _ in own.values():
        for name, content in files.items():
            response = api.upload(user, name, content)
            assert response.status_code == 202, response.text
            assert response.json()["source"] == name
            accepted[user.tenant].append(response.json())
    a_doc_ids = {item["document_id"] for item in accepted[a.tenant]}
    b_doc_ids = {item["document_id"] for item in accepted[b.tenant]}
    assert not a_doc_ids & b_doc_ids, "the same file name must not collide across tenants"

    # 2. Poll: each tenant sees its jobs, never the other's.
    jobs: dict[str, dict[str, Any]] = {}
    for tenant, (user, _, _, _) in own.items():
        other = b if user is a else a
        for item in accepted[tenant]:
            assert (
                api.client.get(f"/jobs/{item['job_id']}", headers=other.headers).status_code == 404
            )
            job = api.wait_for_job(user, item["job_id"])
            assert job["status"] == "done", job
            assert job["chunks_indexed"] > 0 and job["pages"] >= 1
            assert job["progress"]["done"] == job["progress"]["total"] == job["chunks_indexed"]
            assert job["error"] is None
            jobs[item["document_id"]] = job
    a_pdf = next(i for i in accepted[a.tenant] if i["source"] == "shared-name.pdf")
    assert jobs[a_pdf["document_id"]]["pages"] == 2
    assert api.uploads_left() == []

    # 3. Documents and stats: only one's own.
    for tenant, (user, files, _, _) in own.items():
        listing = api.client.get("/documents", headers=user.headers).json()
        assert listing["count"] == len(files) == len(listing["data"])
        assert {d["source"] for d in listing["data"]} == set(files)
        assert all(d["status"] == "done" and d["chunks"] > 0 for d in listing["data"])
        expected_ids = a_doc_ids if user is a else b_doc_ids
        assert {d["document_id"] for d in listing["data"]} == expected_ids
        stats = api.client.get("/stats", headers=user.headers).json()
        assert stats["documents"] == len(files)
        assert stats["chunks"] == sum(d["chunks"] for d in listing["data"])
        assert stats["chunks"] == api.container.corpus.count(tenant)

    # 4. Search and query: every hit and citation is the tenant's own; no foreign text anywhere.
    for user, _, _, foreign in own.values():
        expected_ids = a_doc_ids if user is a else b_doc_ids
        for question in QUESTIONS:
            found = api.search(user, question, k=10)
            assert found["results"], question
            assert {r["document_id"] for r in found["results"]} <= expected_ids
            _no_text_of(foreign, found)
            answer = api.query(user, question)
            assert {c["document_id"] for c in answer["citations"]} <= expected_ids
            _no_text_of(foreign, answer)
        _no_text_of(foreign, _stream_events(api, user, f"What does {foreign} do?"))

    # The tenant's own facts are found and cited at the page a reader would open.
    answer = api.query(a, "Where is the AMBERFALCON evacuation meeting point?")
    assert "north car park" in answer["answer"]
    cited = [c for c in answer["citations"] if "north car park" in c["snippet"]]
    assert cited and all(c["source"] == "shared-name.pdf" for c in cited)
    assert all(c["page"] == 2 and c["page_label"] == "2" for c in cited)

    # 5. Delete A's reactor document: gone for A, B untouched.
    reactor = next(i for i in accepted[a.tenant] if i["source"] == "reactor.txt")["document_id"]
    b_before = api.client.get("/stats", headers=b.headers).json()
    assert api.client.delete(f"/documents/{reactor}", headers=b.headers).status_code == 404
    deleted = api.client.delete(f"/documents/{reactor}", headers=a.headers)
    assert deleted.status_code == 204 and deleted.content == b""
    assert api.client.get(f"/documents/{reactor}", headers=a.headers).status_code == 404
    assert api.client.delete(f"/documents/{reactor}", headers=a.headers).status_code == 404
    for question in ("How often is the Zephyr-9 reactor coolant replaced?", "Zephyr-9"):
        _no_text_of("Zephyr-9", api.search(a, question, k=50))
        _no_text_of("Zephyr-9", api.query(a, question))
        _no_text_of("17 months", api.query(a, question))
    stats_a = api.client.get("/stats", headers=a.headers).json()
    assert stats_a["documents"] == 1
    assert stats_a["chunks"] == jobs[next(iter(a_doc_ids - {reactor}))]["chunks_indexed"]
    assert api.client.get("/stats", headers=b.headers).json()["chunks"] == b_before["chunks"]
    b_answer = api.query(b, "When are the Quasar-4 turbine blades inspected?")
    assert "3 weeks" in b_answer["answer"]


@pytest.mark.parametrize("question", QUESTIONS)
def test_search_never_returns_another_tenants_chunk_even_at_large_k(
    api: ApiHarness, tenants: tuple[ApiUser, ApiUser], question: str
) -> None:
    a, b = tenants
    for user, foreign in ((a, B_MARK), (b, A_MARK)):
        results = api.search(user, question, k=50)["results"]
        _no_text_of(foreign, results)
        assert [r["rank"] for r in results] == list(range(1, len(results) + 1))


def test_an_empty_tenant_gets_nothing_and_a_refusal(api: ApiHarness) -> None:
    loner = api.add_user("flow-empty")
    assert api.search(loner, "AMBERFALCON evacuation")["results"] == []
    answer = api.query(loner, "Where is the AMBERFALCON evacuation meeting point?")
    assert answer["refused"] is True and answer["citations"] == []
    assert answer["answer"] == api.settings.refusal_text
    assert api.client.get("/documents", headers=loner.headers).json() == {"data": [], "count": 0}
