"""A follow-up rewritten by a real model client can quote the answer before it. Once the asker
no longer reads the documents that answer cited, nobody who does not read them is shown the
rewrite: not her conversation, not the answer record (hers, or an admin's key limited to other
collections, listed or exported), not feedback listings and exports, not a set made from
feedback. Who reads them still sees it.

The model is a scripted OpenAI-compatible server reached over HTTP (RAG_LLM_PROVIDER=openai);
its rewrite carries the earlier answer in, as real models do."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.builders import text_document
from tests.api.harness import ApiFactory, ApiHarness, ApiUser, sse_events
from tests.api.scripted_openai import scripted_openai

pytestmark = pytest.mark.integration

SECRET = "PURPLE-ELEPHANT-4417"
FIRST = "What is the secret code word?"
FOLLOW_UP = "Who picked it?"
VAULT = text_document(f"The secret code word is {SECRET}.")
NOTES = text_document("Marta Quill picked the secret code word for the vault in 2019.")
_PASSAGE = re.compile(r'<passage n="(\d+)" source="([^"]+)"')
_MARKER = re.compile(r"\s*\[\d+\]")


def _reply(messages: list[dict[str, str]]) -> str:
    """Answers cite the passage that says it; a rewrite carries the previous answer in."""
    last = messages[-1]["content"]
    if "<passages>" in last:
        numbers = {source: number for number, source in _PASSAGE.findall(last)}
        question = last.rsplit("Question:", 1)[-1]
        if "picked" in question and "notes.txt" in numbers:
            return f"Marta Quill picked it [{numbers['notes.txt']}]."
        if "vault.txt" in numbers:
            return f"The secret code word is {SECRET} [{numbers['vault.txt']}]."
        return "I do not know."
    answers = [line for line in last.splitlines() if line.startswith("Assistant: ")]
    said = _MARKER.sub("", answers[-1].removeprefix("Assistant: ")).rstrip(".")
    return f"Who picked it, given that {said}?"


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> Iterator[ApiHarness]:
    with scripted_openai(_reply) as base_url:
        yield api_factory(
            llm_provider="openai",
            llm_model="scripted",
            openai_api_key="sk-test",
            openai_base_url=base_url,
            llm_timeout_s=30.0,
        )


def _ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if "json" in response.headers.get("content-type", "") else None


def _turn(api: ApiHarness, user: ApiUser, path: str, content: str, stream: bool) -> Any:
    """A turn's body; streamed, the fields its events carry (`standalone`, tokens, citations,
    `done`)."""
    response = api.client.post(
        f"{path}/messages",
        params={"stream": "true"} if stream else {},
        json={"content": content},
        headers=user.headers,
    )
    if not stream:
        return _ok(response)
    events = sse_events(response)
    named = {name: data for name, data in events}
    text = "".join(data["text"] for name, data in events if name == "token")
    return {**named["standalone"], **named["citations"], **named["done"], "answer": text}


def _key_limited_to(api: ApiHarness, admin: ApiUser, collection: str) -> dict[str, str]:
    """Headers of an API key of `admin` that reads only `collection`."""
    made = {"name": f"{collection} only", "collections": [collection]}
    key = _ok(api.client.post("/auth/keys", json=made, headers=admin.headers), 201)
    return {"Authorization": f"Bearer {key['key']}"}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_rewrite_quoting_an_answer_one_no_longer_reads_is_shown_as_typed(
    api: ApiHarness, stream: bool
) -> None:
    tenant = "rewrite-leak-streamed" if stream else "rewrite-leak"
    admin = api.add_user(tenant)
    member = api.add_user(tenant)
    client = api.client
    made = {"name": "vault", "visibility": "restricted"}
    _ok(client.post("/collections", json=made, headers=admin.headers), 201)
    assert api.upload_and_wait(admin, "vault.txt", VAULT, "vault")["status"] == "done"
    assert api.upload_and_wait(admin, "notes.txt", NOTES)["status"] == "done"
    group = _ok(client.post("/groups", json={"name": "vault readers"}, headers=admin.headers), 201)
    members = f"/groups/{group['group_id']}/members/{member.user_id}"
    _ok(client.put(members, headers=admin.headers), 204)
    grants = {"grants": [{"group_id": group["group_id"], "permission": "read"}]}
    _ok(client.put("/collections/vault/access", json=grants, headers=admin.headers))

    conversation = _ok(client.post("/conversations", headers=member.headers), 201)
    turns = f"/conversations/{conversation['conversation_id']}"
    first = _turn(api, member, turns, FIRST, stream)
    assert SECRET in first["answer"]
    second = _turn(api, member, turns, FOLLOW_UP, stream)
    # The leak's precondition: the rewrite quoted the first answer, the answer cites notes only.
    assert second["rewrite"] == "llm" and SECRET in second["standalone_question"]
    notes = [c["marker"] for c in second["citations"] if c["source"] == "notes.txt"]
    assert notes and {c["source"] for c in second["citations"]} == {"notes.txt"}
    rating = {"rating": "up", "helpful_markers": notes}
    answer_id = second["answer_message_id"]
    _ok(client.post(f"/answers/{answer_id}/feedback", json=rating, headers=member.headers))
    limited = _key_limited_to(api, admin, "general")

    # Who reads the vault sees the rewrite.
    everyone = _ok(client.get("/answers", params={"all": "true"}, headers=admin.headers))
    assert any(SECRET in (r["question"] or "") for r in everyone["data"])

    _ok(client.delete(members, headers=admin.headers), 204)

    shown = _ok(client.get(turns, headers=member.headers))
    asked = [m for m in shown["history"] if m["role"] == "user"]
    assert [m["standalone_question"] for m in asked] == [FIRST, FOLLOW_UP]
    mine = _ok(client.get("/answers", headers=member.headers))
    record = _ok(client.get(f"/answers/{answer_id}", headers=member.headers))
    assert record["question"] == FOLLOW_UP
    rated = _ok(client.get(f"/answers/{answer_id}/feedback", headers=member.headers))
    assert rated["question"] == FOLLOW_UP
    listed = _ok(client.get("/answers", params={"all": "true"}, headers=limited))
    exported = client.get("/answers/export", headers=limited)
    feedback = _ok(client.get("/feedback", headers=limited))
    feedback_lines = client.get("/feedback", params={"format": "jsonl"}, headers=limited)
    assert [f["question"] for f in feedback["data"]] == [FOLLOW_UP]
    made_set = _ok(
        client.post("/evaluations/sets/from-feedback", json={"name": "fb"}, headers=limited), 201
    )
    assert [item["question"] for item in made_set["items"]] == [FOLLOW_UP]
    for seen in (shown, mine, record, rated, listed, feedback, made_set):
        assert SECRET not in json.dumps(seen)
    for response in (exported, feedback_lines):
        assert response.status_code == 200, response.text
        assert SECRET not in response.text and FOLLOW_UP in response.text


def test_a_chat_completion_rewritten_from_the_clients_history_is_recorded_as_typed(
    api: ApiHarness,
) -> None:
    # What the client's earlier answers cite is not known, so not even an admin who reads
    # everything is shown the rewrite later.
    admin = api.add_user("rewrite-chat")
    for name, content in (("vault.txt", VAULT), ("notes.txt", NOTES)):
        assert api.upload_and_wait(admin, name, content)["status"] == "done"
    messages = [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": f"The secret code word is {SECRET} [1]."},
        {"role": "user", "content": FOLLOW_UP},
    ]
    completion = _ok(
        api.client.post(
            "/v1/chat/completions",
            json={"model": "rag", "messages": messages},
            headers=admin.headers,
        )
    )
    assert SECRET in completion["standalone_question"]
    record = _ok(api.client.get(f"/answers/{completion['id']}", headers=admin.headers))
    assert record["question"] == FOLLOW_UP


def test_a_fallback_after_a_rewrite_that_quoted_an_answer_quotes_nothing(api: ApiHarness) -> None:
    # The third turn's rewrite is unusable (it drops what was asked), so the fallback is used:
    # it is made of typed questions, never of the second turn's rewrite, and is shown to anyone.
    admin = api.add_user("rewrite-fallback")
    client = api.client
    _ok(client.post("/collections", json={"name": "elsewhere"}, headers=admin.headers), 201)
    for name, content in (("vault.txt", VAULT), ("notes.txt", NOTES)):
        assert api.upload_and_wait(admin, name, content)["status"] == "done"
    conversation = _ok(client.post("/conversations", headers=admin.headers), 201)
    turns = f"/conversations/{conversation['conversation_id']}"
    _turn(api, admin, turns, FIRST, stream=False)
    second = _turn(api, admin, turns, FOLLOW_UP, stream=False)
    assert second["rewrite"] == "llm" and SECRET in second["standalone_question"]
    third = _turn(api, admin, turns, "When did the notary sign it?", stream=False)
    assert third["rewrite"] == "fallback"
    assert third["standalone_question"].endswith(f"{FOLLOW_UP} When did the notary sign it?")
    assert SECRET not in third["standalone_question"]
    limited = _key_limited_to(api, admin, "elsewhere")
    records = _ok(client.get("/answers", params={"all": "true"}, headers=limited))["data"]
    questions = [r["question"] for r in records]
    assert third["standalone_question"] in questions and FOLLOW_UP in questions
    assert SECRET not in json.dumps(records)
