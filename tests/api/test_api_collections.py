"""Collections, groups and grants through the API, as an admin, a member with one grant and a
reader with none: a document the caller may not read never shows in results, answers,
citations, counts, /stats, pages, jobs, models or the answer cache, and a forbidden document's
404 is the exact body of a missing one. A grant change counts on the next request."""

from __future__ import annotations

import json
import unicodedata
from typing import Any
from urllib.parse import quote

import pytest

from testkit.builders import text_document
from tests.api.harness import ApiHarness, ApiUser, assert_error_body

pytestmark = pytest.mark.integration

T = "collections-co"
SECRET = "The board approved a salary band of 90000 for the harbour pilots in Wick."
PUBLIC = "The harbour of Wick opens at dawn and the ferry leaves at noon every day."
MISSING_DOC = "doc_" + "0" * 32


class People:
    def __init__(self, api: ApiHarness) -> None:
        self.api = api
        self.admin = api.add_user(T)
        self.member = api.add_user(T)
        self.reader = api.add_user(T, role="reader")


@pytest.fixture(scope="module")
def people(api: ApiHarness) -> People:
    return People(api)


def _post(api: ApiHarness, user: ApiUser, path: str, body: Any) -> Any:
    return api.client.post(path, json=body, headers=user.headers)


def _upload(api: ApiHarness, user: ApiUser, name: str, text: str, **fields: str) -> Any:
    return api.client.post(
        "/documents",
        files={"file": (name, text_document(text))},
        data=fields,
        headers=user.headers,
    )


def _uploaded(api: ApiHarness, user: ApiUser, name: str, text: str, **fields: str) -> Any:
    response = _upload(api, user, name, text, **fields)
    assert response.status_code == 202, response.text
    job = api.wait_for_job(user, response.json()["job_id"])
    assert job["status"] == "done", job
    return job


@pytest.fixture(scope="module")
def world(api: ApiHarness, people: People) -> dict[str, Any]:
    """A restricted `board` collection holding the secret, and the public note in general."""
    made = _post(api, people.admin, "/collections", {"name": "board", "visibility": "restricted"})
    assert made.status_code == 201, made.text
    board = made.json()
    secret = _uploaded(api, people.admin, "minutes.txt", SECRET, collection="board")
    public = _uploaded(api, people.admin, "harbour.txt", PUBLIC)
    return {"board": board, "secret": secret["document_id"], "public": public["document_id"]}


def _grant_board(api: ApiHarness, admin: ApiUser, grants: list[dict[str, str]]) -> None:
    """Give the board collection exactly these grants."""
    response = api.client.put(
        "/collections/board/access", json={"grants": grants}, headers=admin.headers
    )
    assert response.status_code == 200, response.text


def _search_sources(api: ApiHarness, user: ApiUser, query: str, **extra: Any) -> set[str]:
    return {hit["source"] for hit in api.search(user, query, **extra)["results"]}


def test_a_restricted_collection_is_invisible_to_those_without_a_grant(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    question = "salary band for the harbour pilots"
    assert "minutes.txt" in _search_sources(api, people.admin, question)
    api.query(people.admin, question)  # an answer the cache keeps, read from the minutes
    admin_stats = api.client.get("/stats", headers=people.admin.headers).json()
    assert admin_stats["cache_entries"] >= 1 and admin_stats["cache_misses"] >= 1
    for user in (people.member, people.reader):
        assert "minutes.txt" not in _search_sources(api, user, question)
        # Every other way to learn about it is closed, and looks like nothing is there.
        listed = api.client.get("/documents", headers=user.headers).json()
        assert world["secret"] not in {d["document_id"] for d in listed["data"]}
        assert listed["count"] == 1
        for path in ("/documents/{}", "/documents/{}/pages/1/text"):
            theirs = api.client.get(path.format(world["secret"]), headers=user.headers)
            missing = api.client.get(path.format(MISSING_DOC), headers=user.headers)
            assert_error_body(theirs, 404, "not_found")
            assert theirs.json() == missing.json()
        hidden = api.client.get("/collections/board", headers=user.headers)
        absent = api.client.get("/collections/nothing-here", headers=user.headers)
        assert_error_body(hidden, 404, "not_found")
        assert hidden.json()["error"]["message"].replace("board", "X") == absent.json()["error"][
            "message"
        ].replace("nothing-here", "X")
        names = {
            c["name"] for c in api.client.get("/collections", headers=user.headers).json()["data"]
        }
        assert names == {"general"}
        stats = api.client.get("/stats", headers=user.headers).json()
        assert stats["documents"] == 1 and stats["quotas"]["documents"]["used"] == 1
        # The answer cache counts every collection's questions: no figures for them.
        cache = ("cache_entries", "cache_hits", "cache_misses", "cache_hit_rate")
        assert [stats[name] for name in cache] == [None] * 4, stats
        models = {
            m["id"] for m in api.client.get("/v1/models", headers=user.headers).json()["data"]
        }
        assert models == {"rag", "rag:general"}
        hidden_model = api.client.get("/v1/models/rag:board", headers=user.headers)
        absent_model = api.client.get("/v1/models/rag:nothing-here", headers=user.headers)
        assert_error_body(hidden_model, 404, "not_found")
        assert hidden_model.json()["error"]["message"].replace("board", "X") == absent_model.json()[
            "error"
        ]["message"].replace("nothing-here", "X")
    admin_model = api.client.get("/v1/models/rag:board", headers=people.admin.headers)
    assert admin_model.status_code == 200 and admin_model.json()["id"] == "rag:board"
    admin_models = api.client.get("/v1/models", headers=people.admin.headers).json()["data"]
    assert {m["id"] for m in admin_models} == {"rag", "rag:general", "rag:board"}
    listed = api.client.get("/collections", headers=people.admin.headers).json()["data"]
    board = next(c for c in listed if c["name"] == "board")
    assert board["documents"] == 1 and board["chunks"] >= 1 and board["permission"] == "manage"


def test_the_answer_cache_never_hands_one_scope_s_answer_to_another(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    question = "What salary band did the board approve for the harbour pilots?"
    first = api.query(people.admin, question)
    assert any(c["source"] == "minutes.txt" for c in first["citations"])
    assert api.query(people.admin, question)["cache"] == "hit"
    theirs = api.query(people.member, question)
    assert theirs["cache"] == "miss"
    assert all(c["source"] != "minutes.txt" for c in theirs["citations"])
    assert "90000" not in theirs["answer"]


def test_a_grant_counts_on_the_next_request_and_its_removal_too(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    group = _post(api, people.admin, "/groups", {"name": "pilots"}).json()
    joined = api.client.put(
        f"/groups/{group['group_id']}/members/{people.member.user_id}", headers=people.admin.headers
    )
    assert joined.status_code == 204
    granted = api.client.put(
        "/collections/board/access",
        json={"grants": [{"group_id": "pilots", "permission": "read"}]},
        headers=people.admin.headers,
    )
    assert granted.status_code == 200, granted.text
    assert granted.json()["grants"] == [
        {"group_id": group["group_id"], "user_id": None, "permission": "read"}
    ]
    question = "salary band for the harbour pilots"
    assert "minutes.txt" in _search_sources(api, people.member, question)
    assert "minutes.txt" not in _search_sources(api, people.reader, question)
    page = api.client.get(
        f"/documents/{world['secret']}/pages/1/text", headers=people.member.headers
    )
    assert page.status_code == 200 and "90000" in page.json()["text"]
    # Read is not write: the member may neither upload into it nor delete from it.
    refused = _upload(api, people.member, "more.txt", "More minutes.", collection="board")
    assert_error_body(refused, 403, "forbidden")
    gone = api.client.delete(f"/documents/{world['secret']}", headers=people.member.headers)
    assert_error_body(gone, 403, "forbidden")
    left = api.client.delete(
        f"/groups/{group['group_id']}/members/{people.member.user_id}", headers=people.admin.headers
    )
    assert left.status_code == 204
    assert "minutes.txt" not in _search_sources(api, people.member, question)
    actions = [
        e["action"] for e in api.client.get("/audit", headers=people.admin.headers).json()["data"]
    ]
    for action in (
        "collection.created",
        "group.created",
        "group.member_added",
        "collection.access",
        "group.member_removed",
    ):
        assert action in actions


def test_a_removed_write_grant_hides_the_collection_and_the_job_on_the_next_request(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    # The member's access to the board is held once a request has resolved it; the removal
    # must count on the next request all the same (their upload and their job's reading).
    _grant_board(api, people.admin, [{"user_id": people.member.user_id, "permission": "write"}])
    job = _uploaded(
        api, people.member, "log.txt", "The pilots' log of the week.", collection="board"
    )
    seen = api.client.get(f"/jobs/{job['job_id']}", headers=people.member.headers)
    assert seen.status_code == 200 and seen.json()["status"] == "done"
    _grant_board(api, people.admin, [])
    hidden = api.client.get(f"/jobs/{job['job_id']}?wait=1", headers=people.member.headers)
    assert_error_body(hidden, 404, "not_found")
    refused = _upload(api, people.member, "log2.txt", "Another week.", collection="board")
    assert_error_body(refused, 404, "not_found")  # as for a collection that is not there
    gone = api.client.delete(f"/documents/{job['document_id']}", headers=people.admin.headers)
    assert gone.status_code in (200, 202, 204), gone.text  # the board as the other tests know it


def test_a_reader_never_writes_even_with_a_write_grant(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    _grant_board(api, people.admin, [{"user_id": people.reader.user_id, "permission": "write"}])
    refused = _upload(api, people.reader, "reader.txt", "A reader's note.", collection="board")
    assert_error_body(refused, 403, "forbidden")
    listed = api.client.get("/collections", headers=people.reader.headers).json()["data"]
    assert {c["name"]: c["permission"] for c in listed} == {"general": "read", "board": "read"}
    _grant_board(api, people.admin, [])


def test_scopes_and_filters_narrow_never_widen(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    meta = json.dumps({"team": "ops", "year": 2024, "tags": ["tide", "ferry"]})
    _uploaded(
        api, people.member, "ferry.txt", "The ferry timetable changes in winter.", metadata=meta
    )
    question = "ferry timetable winter harbour"
    by_team = _search_sources(api, people.member, question, filters={"team": {"$eq": "ops"}})
    assert by_team == {"ferry.txt"}
    tagged = {"$and": [{"tags": {"$contains": "tide"}}, {"year": {"$gte": 2020}}]}
    assert _search_sources(api, people.member, question, filters=tagged) == {"ferry.txt"}
    assert (
        _search_sources(api, people.member, question, filters={"nobody_has": {"$eq": 1}}) == set()
    )
    # An empty filter sets no condition: the same documents as no filter at all.
    unfiltered = _search_sources(api, people.member, question)
    assert "ferry.txt" in unfiltered
    assert _search_sources(api, people.member, question, filters={}) == unfiltered
    refused = api.query(people.member, question, filters={"nobody_has": {"$eq": 1}})
    assert refused["refused"] is True and refused["citations"] == []
    # Asking for a collection one cannot read is the 404 of a missing one, never a wider search.
    hidden = _post(api, people.member, "/search", {"query": question, "collections": ["board"]})
    assert_error_body(hidden, 404, "not_found")
    # A reference longer than any id or name is bad input, the same on every route that scopes.
    too_long = ["c" * 81]
    chat = {"model": "rag", "messages": [{"role": "user", "content": question}]}
    for path, body in (
        ("/search", {"query": question, "collections": too_long}),
        ("/query", {"question": question, "collections": too_long}),
        ("/v1/chat/completions", {**chat, "collections": too_long}),
    ):
        error = assert_error_body(_post(api, people.member, path, body), 422, "validation_error")
        assert "collections" in error["message"], (path, error)
        # An empty list would read nothing and answer as if nothing matched: refused, as for keys.
        empty = {**body, "collections": []}
        error = assert_error_body(_post(api, people.member, path, empty), 422, "validation_error")
        assert "name at least one collection" in error["message"], (path, error)
    for bad, named in (
        ({"team": {"$regex": "o"}}, "$regex"),
        ({"page": {"$gt": "three"}}, "page"),
        ({"$or": {"team": {"$eq": "ops"}}}, "$or"),
        ({"$not": {"$not": {"$not": {"$not": {"team": {"$eq": "x"}}}}}}, "deeper than 4"),
    ):
        response = _post(api, people.member, "/search", {"query": question, "filters": bad})
        error = assert_error_body(response, 422)
        assert named in error["message"], error


def test_a_document_moves_and_takes_metadata_without_re_embedding(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    made = _post(api, people.admin, "/collections", {"name": "archive", "visibility": "restricted"})
    assert made.status_code == 201
    job = _uploaded(api, people.admin, "tides.txt", "Spring tides at Wick reach five metres.")
    vectors_before = api.container.corpus.count(T)
    assert "tides.txt" in _search_sources(api, people.member, "spring tides Wick metres")
    moved = api.client.patch(
        f"/documents/{job['document_id']}",
        json={"collection": "archive", "metadata": {"shelf": "b2"}},
        headers=people.admin.headers,
    )
    assert moved.status_code == 200, moved.text
    assert moved.json()["collection"] == "archive" and moved.json()["metadata"] == {"shelf": "b2"}
    assert api.container.corpus.count(T) == vectors_before  # nothing re-embedded, nothing lost
    assert "tides.txt" not in _search_sources(api, people.member, "spring tides Wick metres")
    found = _search_sources(
        api,
        people.admin,
        "spring tides Wick metres",
        collections=["archive"],
        filters={"shelf": {"$eq": "b2"}},
    )
    assert found == {"tides.txt"}


def test_an_api_key_reads_only_its_collections_with_its_owner_s_grants_now(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    made = _post(
        api, people.admin, "/auth/keys", {"name": "general only", "collections": ["general"]}
    )
    assert made.status_code == 201, made.text
    assert made.json()["collections"] == ["general"]
    key = {"Authorization": f"Bearer {made.json()['key']}"}
    hits = api.client.post("/search", json={"query": "salary band harbour pilots"}, headers=key)
    assert "minutes.txt" not in {h["source"] for h in hits.json()["results"]}
    # A member cannot give a key a collection it does not read.
    beyond = _post(api, people.member, "/auth/keys", {"name": "x", "collections": ["board"]})
    assert_error_body(beyond, 404, "not_found")
    # A key limited to no collection would read nothing: refused, not made.
    none = _post(api, people.member, "/auth/keys", {"name": "x", "collections": []})
    assert_error_body(none, 422, "validation_error")
    assert none.json()["error"]["message"] == (
        "collections: name at least one collection, or leave collections out for a key that "
        "reads every collection you read"
    )


def test_a_collection_with_documents_is_deleted_only_when_asked_to(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    _post(api, people.admin, "/collections", {"name": "scratch"})
    _uploaded(api, people.admin, "scratch.txt", "Scratch notes about buoys.", collection="scratch")
    kept = api.client.delete("/collections/scratch", headers=people.admin.headers)
    assert_error_body(kept, 409, "conflict")
    going = api.client.delete("/collections/scratch?documents=delete", headers=people.admin.headers)
    assert going.status_code == 202 and going.json()["documents"] == 1
    accepted = going.json()
    assert going.headers["location"] == f"/jobs/{accepted['job_id']}"
    job = api.wait_for_job(people.admin, accepted["job_id"])
    assert job["status"] == "done", job
    assert job["kind"] == "collection_delete" and job["source"] == "scratch"
    assert job["collection_id"] == accepted["collection_id"]
    assert job["progress"]["done"] == job["progress"]["total"] == 1
    assert api.client.get("/collections/scratch", headers=people.admin.headers).status_code == 404
    assert "scratch.txt" not in _search_sources(api, people.admin, "scratch notes buoys")
    listed = api.client.get("/jobs", headers=people.admin.headers).json()["data"]
    assert accepted["job_id"] in {j["job_id"] for j in listed}
    actions = [
        (e["action"], e["detail"].get("documents"))
        for e in api.client.get("/audit", headers=people.admin.headers).json()["data"]
    ]
    assert ("collection.deleted", 1) in actions


def test_a_collection_deletion_is_followed_by_its_manager_and_hidden_from_others(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    made = _post(api, people.admin, "/collections", {"name": "drafts", "visibility": "restricted"})
    assert made.status_code == 201, made.text
    granted = api.client.put(
        "/collections/drafts/access",
        json={"grants": [{"user_id": people.member.user_id, "permission": "manage"}]},
        headers=people.admin.headers,
    )
    assert granted.status_code == 200, granted.text
    _uploaded(api, people.member, "draft-a.txt", "Draft about quay lights.", collection="drafts")
    _uploaded(api, people.member, "draft-b.txt", "Draft about quay cranes.", collection="drafts")
    going = api.client.delete("/collections/drafts?documents=delete", headers=people.member.headers)
    assert going.status_code == 202, going.text
    job_id = going.json()["job_id"]
    # The manager who asked follows it to the end, after the collection is gone.
    job = api.wait_for_job(people.member, job_id)
    assert job["status"] == "done" and job["progress"]["done"] == 2, job
    assert api.client.get("/collections/drafts", headers=people.member.headers).status_code == 404
    # Someone who never read the collection sees no such job, exactly as a missing one.
    theirs = api.client.get(f"/jobs/{job_id}", headers=people.reader.headers)
    missing = api.client.get(f"/jobs/job_{'0' * 24}", headers=people.reader.headers)
    assert theirs.status_code == missing.status_code
    assert theirs.content == missing.content


def test_a_deleted_restricted_collection_leaves_no_jobs_for_those_who_never_read_it(
    api: ApiHarness,
) -> None:
    # A tenant of its own: once its one restricted collection is gone, the member reads every
    # collection left, which must not open the jobs of what they could never read.
    tenant = "collections-gone"
    admin, member = api.add_user(tenant), api.add_user(tenant)
    made = _post(api, admin, "/collections", {"name": "payroll", "visibility": "restricted"})
    assert made.status_code == 201, made.text
    upload = _uploaded(api, admin, "salaries-2026.txt", SECRET, collection="payroll")
    going = api.client.delete("/collections/payroll?documents=delete", headers=admin.headers)
    assert going.status_code == 202, going.text
    deletion = api.wait_for_job(admin, going.json()["job_id"])
    assert deletion["status"] == "done", deletion

    for job_id in (upload["job_id"], deletion["job_id"]):
        theirs = api.client.get(f"/jobs/{job_id}", headers=member.headers)
        missing = api.client.get(f"/jobs/job_{'0' * 24}", headers=member.headers)
        assert_error_body(theirs, 404, "not_found")
        assert theirs.content == missing.content
    listed = api.client.get("/jobs", headers=member.headers).json()
    assert listed == {"data": [], "count": 0}
    # The admin who did it still follows both.
    seen = {j["source"] for j in api.client.get("/jobs", headers=admin.headers).json()["data"]}
    assert seen == {"salaries-2026.txt", "payroll"}


def test_each_collection_holds_its_own_document_of_a_name(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    for name in ("north", "south"):
        assert _post(api, people.admin, "/collections", {"name": name}).status_code == 201
    north = _uploaded(
        api, people.admin, "handbook.txt", "North handbook: the beacon is red.", collection="north"
    )
    south = _uploaded(
        api,
        people.admin,
        "handbook.txt",
        "South handbook: the beacon is green.",
        collection="south",
    )
    assert north["document_id"] != south["document_id"]
    both = api.search(
        people.admin, "handbook beacon colour", filters={"source": {"$eq": "handbook.txt"}}
    )
    assert {h["document_id"] for h in both["results"]} == {
        north["document_id"],
        south["document_id"],
    }
    # Uploading the name again to one collection replaces that one only, under the same id.
    again = _uploaded(
        api, people.admin, "handbook.txt", "North handbook: the beacon is blue.", collection="north"
    )
    assert again["document_id"] == north["document_id"]
    texts = {
        d: api.client.get(f"/documents/{d}/pages/1/text", headers=people.admin.headers).json()[
            "text"
        ]
        for d in (north["document_id"], south["document_id"])
    }
    assert "blue" in texts[north["document_id"]] and "green" in texts[south["document_id"]]
    # Without a collection, an upload is general's document of that name: a third one.
    plain = _uploaded(api, people.admin, "handbook.txt", "General handbook: no beacon.")
    assert plain["document_id"] not in (north["document_id"], south["document_id"])
    # A move into a collection that already holds the name is a conflict; nothing moves.
    clash = api.client.patch(
        f"/documents/{north['document_id']}",
        json={"collection": "south"},
        headers=people.admin.headers,
    )
    assert_error_body(clash, 409, "conflict")
    shown = api.client.get(f"/documents/{north['document_id']}", headers=people.admin.headers)
    assert shown.json()["collection"] == "north"
    for d in (plain, north, south):
        api.client.delete(f"/documents/{d['document_id']}", headers=people.admin.headers)


def test_bad_metadata_is_a_422_naming_the_problem_and_nothing_is_kept(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    for metadata, named in (
        ('{"Team": "ops"}', "'Team'"),
        ('{"source": "x"}', "built-in"),
        ('{"notes": "' + "x" * 300 + '"}', "256"),
        ('{"tags": [1, 2]}', "'tags'"),
        ("[1, 2]", "JSON object"),
        ("{not json", "not valid JSON"),
    ):
        response = _upload(api, people.member, "bad-meta.txt", "Some text.", metadata=metadata)
        error = assert_error_body(response, 422)
        assert named in error["message"], (metadata, error)
    assert api.uploads_left() == []
    listed = api.client.get("/documents", headers=people.member.headers).json()["data"]
    assert "bad-meta.txt" not in {d["source"] for d in listed}
    patched = api.client.patch(
        f"/documents/{world['public']}",
        json={"metadata": {"9lives": 1}},
        headers=people.admin.headers,
    )
    assert "'9lives'" in assert_error_body(patched, 422)["message"]


def test_a_chat_model_names_a_collection_and_never_reaches_past_it(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    def chat(user: ApiUser, model: str) -> Any:
        body = {"model": model, "messages": [{"role": "user", "content": "salary band pilots"}]}
        return _post(api, user, "/v1/chat/completions", body)

    admin = chat(people.admin, "rag:board")
    assert admin.status_code == 200, admin.text
    assert {c["source"] for c in admin.json()["citations"]} == {"minutes.txt"}
    general = chat(people.admin, "rag:general").json()
    assert "minutes.txt" not in {c["source"] for c in general["citations"]}
    assert_error_body(chat(people.member, "rag:board"), 404, "not_found")
    assert_error_body(chat(people.member, "gpt-4o"), 422)


def test_a_search_filters_on_the_language_detected_in_each_document(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    german = "Das Ventil im Hafen wird jeden Monat geprüft und die Dichtung ist nicht aus Gummi."
    job = _uploaded(api, people.admin, "ventil.txt", german)
    shown = api.client.get(f"/documents/{job['document_id']}", headers=people.admin.headers)
    assert shown.json()["language"] == "de"
    public = api.client.get(f"/documents/{world['public']}", headers=people.admin.headers)
    assert public.json()["language"] == "en"
    question = "Ventil Dichtung harbour ferry"
    in_german = _search_sources(api, people.admin, question, filters={"language": {"$eq": "de"}})
    assert in_german == {"ventil.txt"}
    in_english = _search_sources(api, people.admin, question, filters={"language": {"$in": ["en"]}})
    assert "ventil.txt" not in in_english and "harbour.txt" in in_english
    finnish = {"language": {"$eq": "fi"}}
    assert _search_sources(api, people.admin, question, filters=finnish) == set()
    api.client.delete(f"/documents/{job['document_id']}", headers=people.admin.headers)


def test_built_in_fields_filter_by_uploader_date_type_and_page(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    question = "harbour of Wick ferry dawn noon"
    mine = {"uploaded_by": {"$eq": people.admin.username}}
    assert _search_sources(api, people.member, question, filters=mine) == {"harbour.txt"}
    nobody = {"uploaded_by": {"$eq": "someone-else"}}
    assert _search_sources(api, people.member, question, filters=nobody) == set()
    since = {"uploaded_at": {"$gte": "2000-01-01"}}
    assert "harbour.txt" in _search_sources(api, people.member, question, filters=since)
    future = {"uploaded_at": {"$gt": "2999-01-01T00:00:00Z"}}
    assert _search_sources(api, people.member, question, filters=future) == set()
    text = {"content_type": {"$eq": "text/plain"}, "source": {"$eq": "harbour.txt"}}
    # One leaf per field: two fields in one object are a 422, under $and they are fine.
    assert_error_body(
        _post(api, people.member, "/search", {"query": question, "filters": text}), 422
    )
    both = {"$and": [{"content_type": {"$eq": "text/plain"}}, {"page": {"$eq": 1}}]}
    assert "harbour.txt" in _search_sources(api, people.member, question, filters=both)
    assert _search_sources(api, people.member, question, filters={"page": {"$gt": 1}}) == set()


def test_a_collection_name_is_one_to_sixty_four_characters_on_create_and_rename(
    api: ApiHarness, people: People
) -> None:
    longest = "n" * 64
    made = _post(api, people.admin, "/collections", {"name": longest})
    assert made.status_code == 201, made.text
    assert (
        api.client.get(f"/collections/{longest}", headers=people.admin.headers).json()["name"]
        == longest
    )
    for bad in ("", "n" * 65):
        assert_error_body(_post(api, people.admin, "/collections", {"name": bad}), 422)
        renamed = api.client.patch(
            f"/collections/{longest}", json={"name": bad}, headers=people.admin.headers
        )
        assert_error_body(renamed, 422)
    names = {
        c["name"]
        for c in api.client.get("/collections", headers=people.admin.headers).json()["data"]
    }
    assert longest in names and "n" * 65 not in names


def test_a_name_its_own_address_could_not_reach_is_refused_and_others_are_reached_by_name(
    api: ApiHarness, people: People
) -> None:
    # /collections/{name} and /groups/{name} take one path segment: a '/' in the name (even
    # percent-encoded) or a name of dots, which clients resolve as '.' and '..', cannot be it.
    for bad in ("legal/contracts", "..", "."):
        for path in ("/collections", "/groups"):
            error = assert_error_body(_post(api, people.admin, path, {"name": bad}), 422)
            assert "/" in error["message"] and "dots" in error["message"], error
        assert bad not in {
            c["name"]
            for c in api.client.get("/collections", headers=people.admin.headers).json()["data"]
        }
    made = _post(api, people.admin, "/collections", {"name": "contracts"})
    assert made.status_code == 201, made.text
    renamed = api.client.patch(
        "/collections/contracts", json={"name": "legal/contracts"}, headers=people.admin.headers
    )
    assert_error_body(renamed, 422)
    # Spaces, Arabic and a dot inside a name stay allowed, and each is reached by its name.
    for good in ("legal contracts", "العقود", "v1.2 notes"):
        assert _post(api, people.admin, "/collections", {"name": good}).status_code == 201
        found = api.client.get(f"/collections/{quote(good, safe='')}", headers=people.admin.headers)
        assert found.status_code == 200 and found.json()["name"] == good, found.text


def test_a_name_is_one_name_however_its_accents_are_composed(
    api: ApiHarness, people: People
) -> None:
    composed, decomposed = (unicodedata.normalize(f, "procès-verbaux") for f in ("NFC", "NFD"))
    for path in ("/collections", "/groups"):
        made = _post(api, people.admin, path, {"name": decomposed})
        assert made.status_code == 201, made.text
        assert made.json()["name"] == composed  # stored as every document name is: NFC
        # The same name typed the other way is taken, and reaches the one it names.
        assert_error_body(_post(api, people.admin, path, {"name": composed}), 409, "conflict")
        for spelt in (composed, decomposed):
            found = api.client.get(f"{path}/{quote(spelt, safe='')}", headers=people.admin.headers)
            assert found.status_code == 200, found.text
            assert found.json()["name"] == composed


def _same_answer(hidden: Any, absent: Any, hidden_name: str, absent_name: str) -> None:
    """Two responses alike but for the name asked for: nothing tells the two names apart."""
    assert hidden.status_code == absent.status_code, (hidden.text, absent.text)
    assert hidden.text.replace(hidden_name, "X") == absent.text.replace(absent_name, "X")


def test_a_hidden_collection_s_name_is_no_oracle_when_naming_a_collection(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    """Creating or renaming to the name of a collection the caller cannot read answers exactly
    as a free name does; only a caller who sees every collection is told a name is taken."""
    made = _post(api, people.admin, "/collections", {"name": "harbour-ops"})
    assert made.status_code == 201, made.text
    ops = made.json()["collection_id"]
    granted = api.client.put(
        f"/collections/{ops}/access",
        json={"grants": [{"user_id": people.member.user_id, "permission": "manage"}]},
        headers=people.admin.headers,
    )
    assert granted.status_code == 200, granted.text
    issued = _post(api, people.admin, "/auth/keys", {"name": "ops", "collections": ["general"]})
    assert issued.status_code == 201, issued.text
    key = {"Authorization": f"Bearer {issued.json()['key']}"}
    created: list[str] = []
    try:
        # The member manages harbour-ops but cannot read board; the admin's key reads general.
        probes = [
            (people.member.headers, "PATCH", f"/collections/{ops}"),
            (key, "PATCH", "/collections/general"),
            (key, "POST", "/collections"),
        ]
        for headers, method, path in probes:
            answers = []
            for name in ("board", "free-name"):
                response = api.client.request(method, path, json={"name": name}, headers=headers)
                if response.status_code == 201:
                    created.append(response.json()["collection_id"])
                answers.append(response)
            hidden, free = answers
            _same_answer(hidden, free, "board", "free-name")
            assert_error_body(hidden, 403, "forbidden")
        # Nothing was renamed; the manager still re-describes it.
        names = {
            c["name"]
            for c in api.client.get("/collections", headers=people.admin.headers).json()["data"]
        }
        assert {"harbour-ops", "general", "board"} <= names and "free-name" not in names
        described = api.client.patch(
            f"/collections/{ops}",
            json={"description": "Tugs and pilots"},
            headers=people.member.headers,
        )
        assert described.status_code == 200, described.text
        # A client that sends the form whole, its own name unchanged, is not refused for it.
        resent = api.client.patch(
            f"/collections/{ops}",
            json={"name": "harbour-ops", "description": "Tugs, pilots and moorings"},
            headers=people.member.headers,
        )
        assert resent.status_code == 200, resent.text
        assert resent.json()["description"] == "Tugs, pilots and moorings"
        # An admin signed in reads every collection: a taken name is a 409 naming it.
        taken = api.client.patch(
            f"/collections/{ops}", json={"name": "board"}, headers=people.admin.headers
        )
        assert_error_body(taken, 409, "conflict")
        assert "board" in taken.json()["error"]["message"]
    finally:
        for collection_id in [ops, *created]:
            api.client.delete(f"/collections/{collection_id}", headers=people.admin.headers)
        api.client.delete(f"/auth/keys/{issued.json()['key_id']}", headers=people.admin.headers)


def test_grants_reveal_no_group_to_who_may_not_manage_the_collection(
    api: ApiHarness, people: People, world: dict[str, Any]
) -> None:
    """Granting to a group that exists or to one that does not answers alike unless the caller
    manages the collection: a member cannot probe group names through another's grants."""
    made = _post(api, people.admin, "/groups", {"name": "tug-crews"})
    assert made.status_code == 201, made.text
    try:
        for collection in ("general", "board", "nothing-here"):
            answers = [
                api.client.put(
                    f"/collections/{collection}/access",
                    json={"grants": [{"group_id": group, "permission": "read"}]},
                    headers=people.member.headers,
                )
                for group in ("tug-crews", "no-such-crew")
            ]
            _same_answer(answers[0], answers[1], "tug-crews", "no-such-crew")
            assert answers[0].status_code in (403, 404), answers[0].text
        # Who manages it still learns that a group is missing.
        missing = api.client.put(
            "/collections/board/access",
            json={"grants": [{"group_id": "no-such-crew", "permission": "read"}]},
            headers=people.admin.headers,
        )
        assert_error_body(missing, 404, "not_found")
        assert "group not found" in missing.json()["error"]["message"]
    finally:
        api.client.delete(f"/groups/{made.json()['group_id']}", headers=people.admin.headers)
