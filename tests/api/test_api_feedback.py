"""Answer ids, the per-tenant answer record and feedback on answers, on the real stack.

Every way of asking gives an answer id; the record of an answer is its asker's (and their
admin's), never another tenant's; one rating per person per answer, changed in place; the audit
log has the rating but not the comment; GET /feedback lists, filters and exports; with
RAG_ANSWER_LOG_DAYS=0 no question text reaches the database file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app import metrics
from app.main import create_app
from app.services.blocks.answer_log import PRUNE_EVERY_S, new_answer_id
from app.storage.answer_records import AnswerRecord
from app.storage.db import utc_now
from app.timing import AtMostEvery
from testkit.builders import pdf_document
from tests.api.harness import ApiFactory, ApiHarness, ApiUser, api_settings, assert_error_body

pytestmark = pytest.mark.integration

A, B = "quality-a", "quality-b"
METRICS_TOKEN = "feedback-scrape-secret-0123"
TIDES = (
    "Tide tables for the harbour of Wick: high water at 06:10 and 18:32 on the first of May.",
    "Moorings at Wick cost 12 pounds a night; the harbour master collects the fee at noon.",
)
QUESTION = "When is high water at Wick?"
COMMENT = "It should have quoted the mooring fee page instead, says Agnes"


@dataclass
class People:
    alice: ApiUser  # admin of A
    bob: ApiUser  # member of A
    carol: ApiUser  # reader of A
    dave: ApiUser  # admin of B
    document_id: str
    other_document: str  # B's


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> Iterator[ApiHarness]:
    harness = api_factory(metrics_enabled=True, metrics_token=METRICS_TOKEN)
    yield harness
    metrics.disable()


@pytest.fixture(scope="module")
def people(api: ApiHarness) -> People:
    alice, bob = api.add_user(A), api.add_user(A)
    carol, dave = api.add_user(A, role="reader"), api.add_user(B)
    job = api.upload_and_wait(alice, "tides.pdf", pdf_document(*TIDES))
    assert job["status"] == "done", job
    other = api.upload_and_wait(dave, "secret.pdf", pdf_document("Dave's own tide notes."))
    return People(alice, bob, carol, dave, job["document_id"], other["document_id"])


def ask(api: ApiHarness, user: ApiUser, question: str = QUESTION) -> dict[str, Any]:
    return dict(api.query(user, question))


def rate(api: ApiHarness, user: ApiUser, answer_id: str, **body: Any) -> Any:
    return api.client.post(f"/answers/{answer_id}/feedback", json=body, headers=user.headers)


def feedback_counts(api: ApiHarness) -> dict[str, float]:
    scraped = api.client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert scraped.status_code == 200, scraped.text
    counts = {}
    for family in text_string_to_metric_families(scraped.text):
        for sample in family.samples:
            if sample.name == "rag_feedback_total":
                counts[sample.labels["rating"]] = sample.value
    return counts


def stream_done(api: ApiHarness, user: ApiUser, question: str) -> dict[str, Any]:
    with api.client.stream(
        "POST", "/query/stream", json={"question": question}, headers=user.headers
    ) as response:
        assert response.status_code == 200
        text = "".join(response.iter_text())
    events = [block for block in text.split("\n\n") if block.startswith("event: done")]
    assert len(events) == 1, text
    return dict(json.loads(events[0].split("data: ", 1)[1]))


def test_every_way_of_asking_gives_an_answer_id_with_its_record(
    api: ApiHarness, people: People
) -> None:
    answered = ask(api, people.bob)
    record = api.client.get(f"/answers/{answered['answer_id']}", headers=people.bob.headers)
    assert record.status_code == 200, record.text
    body = record.json()
    assert body["question"] == QUESTION
    assert body["user_id"] == people.bob.user_id
    assert body["model"] == "extractive"
    assert body["cited"] and body["cited"][0]["document_id"] == people.document_id
    assert body["cited"][0]["page"] in (1, 2)
    assert [r["rank"] for r in body["retrieved"]] == list(range(1, len(body["retrieved"]) + 1))
    assert body["retrieved"][0]["source"] == "tides.pdf"
    assert body["total_ms"] > 0 and body["timings"]

    done = stream_done(api, people.bob, "What do moorings at Wick cost?")
    streamed = api.client.get(f"/answers/{done['answer_id']}", headers=people.bob.headers)
    assert streamed.json()["question"] == "What do moorings at Wick cost?"

    conversation = api.client.post("/conversations", headers=people.bob.headers).json()
    turn = api.client.post(
        f"/conversations/{conversation['conversation_id']}/messages",
        json={"content": "Who collects the mooring fee?"},
        headers=people.bob.headers,
    ).json()
    assert turn["answer_id"] == turn["answer_message_id"]
    assert rate(api, people.bob, turn["answer_message_id"], rating="up").status_code == 200

    chat = api.client.post(
        "/v1/chat/completions",
        json={"model": "rag", "messages": [{"role": "user", "content": QUESTION}]},
        headers=people.bob.headers,
    ).json()
    assert chat["id"].startswith("chatcmpl-")
    assert rate(api, people.bob, chat["id"], rating="down").status_code == 200
    ids = {answered["answer_id"], done["answer_id"], turn["answer_id"], chat["id"][9:]}
    assert len(ids) == 4  # every answer its own id, even the cached repeat of QUESTION


def test_a_cached_answer_records_the_same_retrieved_documents_as_the_fresh_one(
    api: ApiHarness, people: People
) -> None:
    question = "What is the nightly mooring fee at Wick?"
    fresh, repeat = ask(api, people.bob, question), ask(api, people.bob, question)
    assert (fresh["cache"], repeat["cache"]) == ("miss", "hit")
    records = [
        api.client.get(f"/answers/{answered['answer_id']}", headers=people.bob.headers).json()
        for answered in (fresh, repeat)
    ]
    assert [r["cache"] for r in records] == ["miss", "hit"]
    assert records[0]["retrieved"] and records[0]["retrieved"][0]["source"] == "tides.pdf"
    assert records[1]["retrieved"] == records[0]["retrieved"]


def test_feedback_on_another_users_or_another_tenants_answer_is_a_404(
    api: ApiHarness, people: People
) -> None:
    bobs = ask(api, people.bob)["answer_id"]
    for stranger in (people.alice, people.carol, people.dave):  # admin, reader, other tenant
        assert_error_body(rate(api, stranger, bobs, rating="down"), 404, "not_found")
    assert_error_body(rate(api, people.bob, "0" * 32, rating="up"), 404, "not_found")
    assert_error_body(
        api.client.get(f"/answers/{bobs}", headers=people.dave.headers), 404, "not_found"
    )
    assert_error_body(
        api.client.get(f"/answers/{bobs}", headers=people.carol.headers), 404, "not_found"
    )
    assert rate(api, people.bob, bobs, rating="up").status_code == 200


def test_rating_twice_changes_the_rating_never_duplicates_and_audits_no_comment(
    api: ApiHarness, people: People
) -> None:
    before = feedback_counts(api)
    answer_id = ask(api, people.carol)["answer_id"]
    first = rate(api, people.carol, answer_id, rating="up", helpful_markers=[1])
    assert first.status_code == 200, first.text
    assert first.json()["changed"] is False
    second = rate(
        api,
        people.carol,
        answer_id,
        rating="down",
        comment=COMMENT,
        expected=[{"source": "tides.pdf", "page": 2}],
    )
    assert second.status_code == 200, second.text
    assert second.json()["changed"] is True
    mine = api.client.get(f"/answers/{answer_id}/feedback", headers=people.carol.headers).json()
    assert (mine["rating"], mine["comment"]) == ("down", COMMENT)
    assert mine["expected"] == [
        {"document_id": people.document_id, "source": "tides.pdf", "page": 2}
    ]

    listed = api.client.get(
        "/feedback", params={"user_id": people.carol.user_id}, headers=people.alice.headers
    ).json()
    assert listed["count"] == 1
    assert listed["data"][0]["question"] == QUESTION
    assert listed["data"][0]["rating"] == "down"

    audit = api.client.get(
        "/audit", params={"action": "answer.rated"}, headers=people.alice.headers
    ).json()
    carols = [e for e in audit["data"] if e["target_id"] == answer_id]
    assert [e["detail"]["rating"] for e in carols] == ["down", "up"]
    assert carols[0]["detail"]["previous"] == "up" and carols[0]["detail"]["comment"] is True
    assert "Agnes" not in json.dumps(audit)

    after = feedback_counts(api)
    assert after.get("up", 0) - before.get("up", 0) == 1
    assert after.get("down", 0) - before.get("down", 0) == 1


def test_feedback_checks_what_it_is_given(api: ApiHarness, people: People) -> None:
    answer_id = ask(api, people.bob)["answer_id"]
    bad = [
        {"rating": "meh"},
        {"rating": "down", "expected": [{"source": "secret.pdf"}]},  # B's file, not A's
        {"rating": "down", "expected": [{"document_id": people.other_document}]},
        {"rating": "down", "expected": [{"source": "tides.pdf", "page": 9}]},  # 2 pages
        {"rating": "down", "expected": [{"page": 1}]},
        {"rating": "up", "helpful_markers": [7]},  # not a marker the answer cited
        {"rating": "up", "comment": "x" * 2001},
    ]
    for body in bad:
        assert_error_body(rate(api, people.bob, answer_id, **body), 422)
    listed = api.client.get("/feedback", headers=people.alice.headers).json()
    assert answer_id not in {f["answer_id"] for f in listed["data"]}


def test_a_reader_sees_only_their_own_answers_an_admin_exports_and_deletes_the_tenants(
    api: ApiHarness, people: People
) -> None:
    carols = ask(api, people.carol, "Who collects the fee at noon?")["answer_id"]
    bobs = ask(api, people.bob, "What is the high water time?")["answer_id"]
    own = api.client.get("/answers", params={"all": "true"}, headers=people.carol.headers)
    shown = {r["answer_id"] for r in own.json()["data"]}
    assert carols in shown and bobs not in shown
    assert {r["user_id"] for r in own.json()["data"]} == {people.carol.user_id}
    everyone = api.client.get("/answers", params={"all": "true"}, headers=people.alice.headers)
    assert {carols, bobs} <= {r["answer_id"] for r in everyone.json()["data"]}
    assert api.client.get("/answers", headers=people.dave.headers).json()["count"] == 0
    assert_error_body(api.client.get("/answers/export", headers=people.bob.headers), 403)

    exported = api.client.get("/answers/export", headers=people.alice.headers)
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in exported.text.splitlines()]
    assert {carols, bobs} <= {line["answer_id"] for line in lines}
    assert len(lines) == everyone.json()["count"]
    assert not any(line["question"] == "Dave's own tide notes." for line in lines)

    assert_error_body(api.client.delete("/answers", headers=people.bob.headers), 403)
    dave_answer = ask(api, people.dave, "Whose notes are these?")["answer_id"]
    deleted = api.client.delete("/answers", headers=people.alice.headers)
    assert deleted.status_code == 200 and deleted.json()["deleted"] == len(lines)
    assert (
        api.client.get("/answers", params={"all": "true"}, headers=people.alice.headers).json()[
            "count"
        ]
        == 0
    )
    assert api.client.get(f"/answers/{dave_answer}", headers=people.dave.headers).status_code == 200


def test_feedback_is_listed_filtered_and_exported_for_admins_only(
    api: ApiHarness, people: People
) -> None:
    up = ask(api, people.bob, "Where is Wick harbour?")["answer_id"]
    down = ask(api, people.bob, "What does a night's mooring cost?")["answer_id"]
    assert rate(api, people.bob, up, rating="up").status_code == 200
    assert (
        rate(
            api, people.bob, down, rating="down", expected=[{"source": "tides.pdf", "page": 2}]
        ).status_code
        == 200
    )
    assert_error_body(api.client.get("/feedback", headers=people.bob.headers), 403, "forbidden")
    downs = api.client.get(
        "/feedback",
        params={"rating": "down", "with_expected": "true"},
        headers=people.alice.headers,
    ).json()
    assert down in {f["answer_id"] for f in downs["data"]}
    assert up not in {f["answer_id"] for f in downs["data"]}
    assert all(f["rating"] == "down" and f["expected"] for f in downs["data"])
    exported = api.client.get(
        "/feedback", params={"format": "jsonl", "rating": "up"}, headers=people.alice.headers
    )
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in exported.text.splitlines()]
    assert up in {line["answer_id"] for line in lines}
    assert {line["rating"] for line in lines} == {"up"}
    assert api.client.get("/feedback", headers=people.dave.headers).json()["count"] == 0


def test_a_date_or_a_time_without_an_offset_is_read_as_utc(api: ApiHarness, people: People) -> None:
    rated = ask(api, people.bob, "When does the ferry leave Wick?")["answer_id"]
    assert rate(api, people.bob, rated, rating="up").status_code == 200
    today = utc_now().date()
    tomorrow, yesterday = today + timedelta(days=1), today - timedelta(days=1)
    for params, kept in [
        ({"since": today.isoformat()}, True),
        ({"since": f"{today}T00:00:00"}, True),
        ({"until": tomorrow.isoformat()}, True),
        ({"since": tomorrow.isoformat()}, False),
    ]:
        listed = api.client.get("/feedback", params=params, headers=people.alice.headers)
        assert listed.status_code == 200, (params, listed.text)
        assert (rated in {f["answer_id"] for f in listed.json()["data"]}) is kept, params
    older = {"before": yesterday.isoformat()}
    deleted = api.client.delete("/answers", params=older, headers=people.alice.headers)
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["deleted"] == 0  # every record here is from today
    shown = api.client.get(f"/answers/{rated}", headers=people.bob.headers)
    assert shown.status_code == 200


def test_with_the_answer_record_off_no_question_text_is_stored(
    api_factory: ApiFactory,
) -> None:
    harness = api_factory(answer_log_days=0)
    user = harness.add_user("quality-off")
    job = harness.upload_and_wait(user, "tides.pdf", pdf_document(*TIDES))
    assert job["status"] == "done"
    question = "Quokka-zebra probe: when is high water at Wick harbour?"
    answer_id = harness.query(user, question)["answer_id"]
    rated = rate(harness, user, answer_id, rating="down", comment="wrong tide")
    assert rated.status_code == 200, rated.text
    assert rated.json()["question"] is None
    record = harness.client.get(f"/answers/{answer_id}", headers=user.headers).json()
    assert record["question"] is None and record["cited"] == [] and record["retrieved"] == []
    other = harness.add_user("quality-off")
    assert_error_body(rate(harness, other, answer_id, rating="up"), 404, "not_found")
    harness.container.database.engine.dispose()  # the WAL is checkpointed into the file
    stored = b"".join(
        path.read_bytes()
        for path in Path(harness.settings.data_dir).rglob("*")
        if path.is_file() and path.name.startswith("rag.db")
    )
    assert b"Quokka-zebra" not in stored
    assert b"wrong tide" in stored  # what the person sent is kept


BOARD_MINUTES = "Board minutes: the harbour pilots' salary band rises to 90000 kroner next spring."
BOARD_QUESTION = "What is the salary band of the harbour pilots?"
HARBOUR_NOTICE = "Harbour notice: the pilots' boats are inspected each spring."
MISSING_DOCUMENT = "doc_" + "0" * 32


def test_the_record_and_feedback_name_only_documents_the_person_still_reads(
    api: ApiHarness,
) -> None:
    tenant = "quality-scope"
    admin, member = api.add_user(tenant), api.add_user(tenant)
    made = api.client.post(
        "/collections", json={"name": "board", "visibility": "restricted"}, headers=admin.headers
    )
    assert made.status_code == 201, made.text
    job = api.upload_and_wait(admin, "minutes.pdf", pdf_document(BOARD_MINUTES), "board")
    assert job["status"] == "done", job
    minutes = job["document_id"]
    # A document everyone reads, retrieved for the question after the minutes.
    notice = api.upload_and_wait(admin, "notice.txt", HARBOUR_NOTICE.encode())
    assert notice["status"] == "done", notice

    def grant(grants: list[dict[str, str]]) -> None:
        granted = api.client.put(
            "/collections/board/access", json={"grants": grants}, headers=admin.headers
        )
        assert granted.status_code == 200, granted.text

    def documents_of(record: dict[str, Any]) -> set[str]:
        return {d["document_id"] for d in record["cited"] + record["retrieved"]}

    grant([{"user_id": member.user_id, "permission": "read"}])
    answer_id = ask(api, member, BOARD_QUESTION)["answer_id"]
    record = api.client.get(f"/answers/{answer_id}", headers=member.headers).json()
    assert minutes in documents_of(record)
    ranked = [(hit["document_id"], hit["rank"]) for hit in record["retrieved"]]
    assert ranked[0] == (minutes, 1) and (notice["document_id"], 2) in ranked, ranked
    grant([])  # revoked: the member no longer reads the minutes, nor sees them in the record

    for path in (f"/answers/{answer_id}", "/answers"):
        shown = api.client.get(path, headers=member.headers).json()
        for record in shown.get("data", [shown]):
            assert minutes not in documents_of(record)
            assert record["question"] == BOARD_QUESTION
            # Ranked among what the member sees: no gap where the minutes stood.
            ranks = [hit["rank"] for hit in record["retrieved"]]
            assert ranks == list(range(1, len(ranks) + 1)) and ranks, record["retrieved"]
    by_admin = api.client.get(f"/answers/{answer_id}", headers=admin.headers).json()
    assert minutes in documents_of(by_admin)
    exported = api.client.get("/answers/export", headers=admin.headers).text.splitlines()
    assert minutes in documents_of(json.loads(exported[-1]))

    # Naming the minutes as the expected page is refused exactly like a missing document.
    def refusal(document: str) -> dict[str, str]:
        named = rate(api, member, answer_id, rating="down", expected=[{"document_id": document}])
        error = assert_error_body(named, 422, "invalid_input")
        return {**error, "message": error["message"].replace(document, "X")}

    assert refusal(minutes) == refusal(MISSING_DOCUMENT)
    grant([{"user_id": member.user_id, "permission": "read"}])
    allowed = rate(api, member, answer_id, rating="down", expected=[{"document_id": minutes}])
    assert allowed.status_code == 200, allowed.text


def _old_record(harness: ApiHarness, user: ApiUser, question: str) -> str:
    """A record of `user`'s, written 40 days ago (the record keeps 30)."""
    answer_id = new_answer_id()
    when = utc_now() - timedelta(days=40)
    record = AnswerRecord(answer_id, user.tenant, user.user_id, when, question=question)
    harness.container.answer_log.store.add(record)
    return answer_id


def listed_questions(harness: ApiHarness, admin: ApiUser) -> list[str]:
    listing = harness.client.get("/answers", params={"all": "true"}, headers=admin.headers)
    assert listing.status_code == 200, listing.text
    return [record["question"] for record in listing.json()["data"]]


def test_records_past_their_days_go_at_start_up_and_before_a_read_without_new_answers(
    tmp_path: Path,
) -> None:
    settings = api_settings(tmp_path / "data", answer_log_days=30)
    with TestClient(create_app(settings)) as client:
        harness = ApiHarness(client.app, client, settings)  # type: ignore[arg-type]
        admin = harness.add_user("quality-retention")
        before_restart = _old_record(harness, admin, "Asked before the restart?")
    with TestClient(create_app(settings)) as client:  # a restart, nothing asked or read since
        harness = ApiHarness(client.app, client, settings)  # type: ignore[arg-type]
        store = harness.container.answer_log.store
        assert store.get(admin.tenant, before_restart) is None
        _old_record(harness, admin, "Asked long before the read?")
        # An hour has passed since start-up: this process has not pruned yet.
        harness.container.answer_log.pruning = AtMostEvery(PRUNE_EVERY_S)
        assert listed_questions(harness, admin) == []
