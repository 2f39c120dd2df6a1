"""Conversations over HTTP on the real stack (Chroma, the shipped embedder, the extractive LLM):
follow-ups, stored turns with citations, streaming, scoping, bounds, and the chat endpoint."""

from __future__ import annotations

from typing import Any

import pytest

from app.providers.types import ChatRequest
from app.request_limits import CHAT_MESSAGES_CEILING
from testkit.builders import text_document
from tests.api.harness import ApiFactory, ApiHarness, ApiUser, assert_error_body, sse_events
from tests.fakes import FakeLLM

pytestmark = pytest.mark.integration

FILES = {
    "castle.txt": text_document(
        "The Harrowgate castle has eleven towers and a moat fed by the river Lune.",
        "The Harrowgate castle was built in 1342 by the stonemason guild of Yarrow.",
    ),
    "lighthouse.txt": text_document(
        "The Brimstone lighthouse beam reaches thirty kilometres out to sea.",
        "The Brimstone lighthouse was built in 1891 by the harbour board of Kettle Bay.",
    ),
}


@pytest.fixture(scope="module")
def reader(api: ApiHarness) -> ApiUser:
    user = api.add_user("convo")
    for name, content in FILES.items():
        assert api.upload_and_wait(user, name, content)["status"] == "done"
    return user


def _start(api: ApiHarness, user: ApiUser) -> str:
    response = api.client.post("/conversations", headers=user.headers)
    assert response.status_code == 201, response.text
    conversation_id: str = response.json()["conversation_id"]
    return conversation_id


def _ask(api: ApiHarness, user: ApiUser, conversation_id: str, content: str) -> Any:
    response = api.client.post(
        f"/conversations/{conversation_id}/messages",
        json={"content": content},
        headers=user.headers,
    )
    assert response.status_code == 200, response.text
    return response.json()


def _sources(body: Any) -> set[str]:
    return {citation["source"] for citation in body["citations"]}


def test_a_follow_up_is_answered_from_its_conversation(api: ApiHarness, reader: ApiUser) -> None:
    conversation = _start(api, reader)
    first = _ask(api, reader, conversation, "How many towers does the Harrowgate castle have?")
    assert first["rewrite"] == "none"
    assert "eleven" in first["answer"] and _sources(first) == {"castle.txt"}

    follow_up = _ask(api, reader, conversation, "When was it built?")
    # The extractive LLM cannot rewrite: its reply is unusable, so the fallback is measured here.
    assert follow_up["rewrite"] == "fallback"
    assert follow_up["standalone_question"] == (
        "How many towers does the Harrowgate castle have? When was it built?"
    )
    assert "1342" in follow_up["answer"] and _sources(follow_up) == {"castle.txt"}
    # The same shape as /query, plus where the turn was stored.
    assert {"answer", "citations", "refused", "cache", "timings", "total_ms"} <= set(follow_up)

    stored = api.client.get(f"/conversations/{conversation}", headers=reader.headers).json()
    history = stored["history"]
    assert [m["role"] for m in history] == ["user", "assistant"] * 2
    assert history[2]["message_id"] == follow_up["question_message_id"]
    assert history[2]["content"] == "When was it built?"
    assert history[2]["standalone_question"] == follow_up["standalone_question"]
    assert history[3]["message_id"] == follow_up["answer_message_id"]
    # Each answer keeps the citations of its own turn.
    assert history[1]["citations"] == first["citations"]
    assert history[3]["citations"] == follow_up["citations"]
    assert stored["title"] == "How many towers does the Harrowgate castle have?"


def test_the_same_follow_up_in_two_conversations_does_not_share_an_answer(
    api: ApiHarness, reader: ApiUser
) -> None:
    castle, lighthouse = _start(api, reader), _start(api, reader)
    _ask(api, reader, castle, "Tell me about the moat of the Harrowgate castle")
    _ask(api, reader, lighthouse, "How far does the Brimstone lighthouse beam reach?")
    about_castle = _ask(api, reader, castle, "Who built it, and when?")
    about_lighthouse = _ask(api, reader, lighthouse, "Who built it, and when?")
    assert "1342" in about_castle["answer"] and _sources(about_castle) == {"castle.txt"}
    assert "1891" in about_lighthouse["answer"] and _sources(about_lighthouse) == {"lighthouse.txt"}
    assert about_lighthouse["cache"] == "miss"
    # The same context and follow-up elsewhere is the same standalone question: a cache hit.
    repeat = _start(api, reader)
    _ask(api, reader, repeat, "Tell me about the moat of the Harrowgate castle")
    hit = _ask(api, reader, repeat, "Who built it, and when?")
    assert hit["cache"] == "hit" and hit["answer"] == about_castle["answer"]


def test_a_streamed_turn_is_stored_as_it_was_streamed(api: ApiHarness, reader: ApiUser) -> None:
    conversation = _start(api, reader)
    _ask(api, reader, conversation, "How far does the Brimstone lighthouse beam reach?")
    response = api.client.post(
        f"/conversations/{conversation}/messages?stream=true",
        json={"content": "Which board built it?"},
        headers=reader.headers,
    )
    events = sse_events(response)
    names = [name for name, _ in events]
    assert names[0] == "standalone" and names[-2:] == ["citations", "done"]
    assert set(names[1:-2]) == {"token"}
    assert events[0][1]["rewrite"] == "fallback"
    streamed = "".join(data["text"] for name, data in events if name == "token")
    assert "harbour board" in streamed
    done = events[-1][1]
    stored = api.client.get(f"/conversations/{conversation}", headers=reader.headers).json()
    answer = stored["history"][-1]
    assert answer["message_id"] == done["answer_message_id"]
    assert answer["content"] == streamed
    assert answer["citations"] == events[-2][1]["citations"]
    assert {c["source"] for c in answer["citations"]} == {"lighthouse.txt"}


def test_someone_elses_conversation_is_a_404_like_a_missing_one(
    api: ApiHarness, reader: ApiUser
) -> None:
    conversation = _start(api, reader)
    _ask(api, reader, conversation, "How many towers does the Harrowgate castle have?")
    colleague = api.add_user(reader.tenant, login=False)
    stranger = api.add_user("convo-other", login=False)
    missing = api.client.get("/conversations/" + "0" * 32, headers=reader.headers)
    expected = assert_error_body(missing, 404, "not_found")
    for user in (colleague, stranger):
        path = f"/conversations/{conversation}"
        for response in (
            api.client.get(path, headers=user.headers),
            api.client.delete(path, headers=user.headers),
            api.client.post(f"{path}/messages", json={"content": "hi"}, headers=user.headers),
            api.client.post(
                f"{path}/messages?stream=true", json={"content": "hi"}, headers=user.headers
            ),
        ):
            assert assert_error_body(response, 404, "not_found") == expected
        listing = api.client.get("/conversations", headers=user.headers).json()
        assert conversation not in {c["conversation_id"] for c in listing["data"]}
    kept = api.client.get(f"/conversations/{conversation}", headers=reader.headers).json()
    assert len(kept["history"]) == 2  # nobody else added to it or deleted it


def test_list_pages_and_delete(api: ApiHarness) -> None:
    user = api.add_user("convo-list", login=False)
    ids = [_start(api, user) for _ in range(3)]
    page = api.client.get("/conversations?limit=2", headers=user.headers).json()
    rest = api.client.get("/conversations?limit=2&offset=2", headers=user.headers).json()
    assert page["count"] == 3 and len(page["data"]) == 2 and len(rest["data"]) == 1
    assert {c["conversation_id"] for c in page["data"] + rest["data"]} == set(ids)
    too_big = api.client.get("/conversations?limit=101", headers=user.headers)
    assert_error_body(too_big, 422)
    assert api.client.delete(f"/conversations/{ids[0]}", headers=user.headers).status_code == 204
    assert_error_body(api.client.get(f"/conversations/{ids[0]}", headers=user.headers), 404)
    assert api.client.get("/conversations", headers=user.headers).json()["count"] == 2


def test_content_is_capped_like_a_query_question(api: ApiHarness, reader: ApiUser) -> None:
    conversation = _start(api, reader)
    limit = api.settings.max_question_chars
    for content in ("x" * (limit + 1), "   "):
        response = api.client.post(
            f"/conversations/{conversation}/messages",
            json={"content": content},
            headers=reader.headers,
        )
        assert_error_body(response, 422, "invalid_input")
    stored = api.client.get(f"/conversations/{conversation}", headers=reader.headers).json()
    assert stored["history"] == []


def test_history_is_bounded_to_the_newest_turns(api_factory: ApiFactory) -> None:
    api = api_factory(conversation_max_turns=2, start_workers=False)
    user = api.add_user("convo-bound", login=False)
    conversation = _start(api, user)
    for n in range(3):
        _ask(api, user, conversation, f"question number {n}")
    stored = api.client.get(f"/conversations/{conversation}", headers=user.headers).json()
    questions = [m["content"] for m in stored["history"] if m["role"] == "user"]
    assert questions == ["question number 1", "question number 2"]


def test_chat_completion_answers_the_last_message_with_citations(
    api: ApiHarness, reader: ApiUser
) -> None:
    messages = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "How far does the Brimstone lighthouse beam reach?"},
        {"role": "assistant", "content": "Thirty kilometres [1]."},
        {"role": "user", "content": "When was it built?"},
    ]
    response = api.client.post(
        "/v1/chat/completions",
        json={"model": "rag", "messages": messages, "temperature": 0.2},
        headers=reader.headers,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "chat.completion"
    assert "1891" in body["choices"][0]["message"]["content"]
    assert {c["source"] for c in body["citations"]} == {"lighthouse.txt"}
    assert body["standalone_question"].startswith("How far does the Brimstone")
    for bad in (
        {"model": "gpt-4o", "messages": messages},
        {"model": "rag", "messages": messages[:3]},  # ends with the assistant
        {"model": "rag", "messages": []},
        {"model": "rag", "messages": [{"role": "tool", "content": "x"}]},
        {"model": "rag", "messages": [{"role": "user", "content": "x" * 8001}]},
        {"model": "rag", "messages": [{"role": "user", "content": "x" * 2001}]},  # /query's cap
    ):
        assert_error_body(
            api.client.post("/v1/chat/completions", json=bad, headers=reader.headers), 422
        )


def _chat(count: int) -> list[dict[str, str]]:
    """`count` chat messages: a system prompt, earlier turns, and the question last."""
    earlier = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"earlier message {n}"}
        for n in range(count - 2)
    ]
    question = {"role": "user", "content": "How far does the Brimstone lighthouse beam reach?"}
    return [{"role": "system", "content": "Answer briefly."}, *earlier, question]


def test_a_chat_request_is_capped_in_messages(api: ApiHarness, reader: ApiUser) -> None:
    at_cap = api.client.post(
        "/v1/chat/completions",
        json={"model": "rag", "messages": _chat(CHAT_MESSAGES_CEILING)},
        headers=reader.headers,
    )
    assert at_cap.status_code == 200, at_cap.text
    assert at_cap.json()["object"] == "chat.completion"
    for stream in (False, True):
        over = api.client.post(
            "/v1/chat/completions",
            json={"model": "rag", "messages": _chat(CHAT_MESSAGES_CEILING + 1), "stream": stream},
            headers=reader.headers,
        )
        error = assert_error_body(over, 422, "validation_error")
        assert "messages" in error["message"] and str(CHAT_MESSAGES_CEILING) in error["message"]


def test_an_llm_rewrite_is_what_retrieval_and_the_answer_see(api_factory: ApiFactory) -> None:
    api = api_factory()
    user = api.add_user("convo-rewrite", login=False)
    for name, content in FILES.items():
        assert api.upload_and_wait(user, name, content)["status"] == "done"

    def reply(request: ChatRequest) -> str:
        grounding = request.grounding
        if grounding is None:  # the rewrite is a plain chat, without passages
            return "When was the Brimstone lighthouse built?"
        # The best-ranked passage is read last, next to the question (RAG_LLM_PASSAGE_ORDER).
        best = len(grounding.passages)
        return f"It was built in 1891 [{best}]." if "1891" in grounding.passages[-1] else "No [1]."

    fake = FakeLLM(reply)
    api.container.__dict__["llm"] = fake  # the process's model, swapped after start-up
    conversation = _start(api, user)
    _ask(api, user, conversation, "How far does the lighthouse beam reach?")
    follow_up = _ask(api, user, conversation, "When was it built?")
    assert follow_up["rewrite"] == "llm"
    assert follow_up["standalone_question"] == "When was the Brimstone lighthouse built?"
    answered = fake.requests[-1].grounding
    assert answered is not None and answered.question == "When was the Brimstone lighthouse built?"
    # The model cited the last passage it read; the reader sees it as the first source.
    assert follow_up["answer"] == "It was built in 1891 [1]."
    assert _sources(follow_up) == {"lighthouse.txt"}
    # The rewrite saw the conversation so far, answer included.
    transcript = fake.requests[-2].messages[-1].content
    assert (
        "How far does the lighthouse beam reach?" in transcript
        and "When was it built?" in transcript
    )


def test_a_follow_up_after_a_revoked_grant_never_reads_the_old_answer(
    api_factory: ApiFactory,
) -> None:
    api = api_factory()
    admin = api.add_user("convo-revoked")
    member = api.add_user("convo-revoked")
    made = api.client.post(
        "/collections", json={"name": "vault", "visibility": "restricted"}, headers=admin.headers
    )
    assert made.status_code == 201, made.text
    secret = text_document("The vault of Kettle Bay opens with the code 4417 at night.")
    assert api.upload_and_wait(admin, "vault.txt", secret, "vault")["status"] == "done"
    grants = [{"user_id": member.user_id, "permission": "read"}]
    granted = api.client.put(
        "/collections/vault/access", json={"grants": grants}, headers=admin.headers
    )
    assert granted.status_code == 200, granted.text

    def reply(request: ChatRequest) -> str:
        if request.grounding is None:  # the rewrite
            return "What else opens at night in Kettle Bay?"
        return "The vault opens with the code 4417 [1]." if request.grounding.passages else "No."

    fake = FakeLLM(reply)
    api.container.__dict__["llm"] = fake
    conversation = _start(api, member)
    first = _ask(api, member, conversation, "What is the code of the vault of Kettle Bay?")
    assert "4417" in first["answer"] and _sources(first) == {"vault.txt"}
    revoked = api.client.put(
        "/collections/vault/access", json={"grants": []}, headers=admin.headers
    )
    assert revoked.status_code == 200, revoked.text
    for stream in (False, True):
        asked = api.client.post(
            f"/conversations/{conversation}/messages",
            params={"stream": "true"} if stream else {},
            json={"content": "And what else opens at night?"},
            headers=member.headers,
        )
        assert asked.status_code == 200, asked.text
        assert "4417" not in asked.text and "vault.txt" not in asked.text
        # The rewrite read the conversation as the member sees it now: the old answer withheld.
        rewrite = next(r for r in reversed(fake.requests) if r.grounding is None)
        transcript = rewrite.messages[-1].content
        assert "What is the code of the vault of Kettle Bay?" in transcript
        assert "4417" not in transcript and "withheld" in transcript


def test_a_conversation_starts_with_the_title_asked_for_and_refuses_what_it_does_not_read(
    api: ApiHarness, reader: ApiUser
) -> None:
    titled = api.client.post(
        "/conversations", json={"title": "  Harrowgate\n  castle  "}, headers=reader.headers
    )
    assert titled.status_code == 201, titled.text
    assert titled.json()["title"] == "Harrowgate castle"
    conversation = titled.json()["conversation_id"]
    _ask(api, reader, conversation, "How many towers does the Harrowgate castle have?")
    shown = api.client.get(f"/conversations/{conversation}", headers=reader.headers).json()
    assert shown["title"] == "Harrowgate castle"  # the first question does not replace it
    # Without a title (no body, or an empty object) the first question names it, as before.
    for body in (None, {}):
        untitled = api.client.post("/conversations", json=body, headers=reader.headers)
        assert untitled.status_code == 201, untitled.text
        assert untitled.json()["title"] == ""
    # A field it does not read, a blank or an overlong title: the 422 naming it, nothing made.
    before = api.client.get("/conversations", headers=reader.headers).json()["count"]
    for body, named in (
        ({"titel": "Harrowgate"}, "titel"),
        ({"collections": ["general"]}, "collections"),
        ({"title": " \n "}, "title"),
        ({"title": "x" * 121}, "title"),
    ):
        refused = api.client.post("/conversations", json=body, headers=reader.headers)
        error = assert_error_body(refused, 422, "validation_error")
        assert named in error["message"], error
    assert api.client.get("/conversations", headers=reader.headers).json()["count"] == before
