"""Conversation quotas and the rate of starting conversations, through the HTTP app: each quota
shown by /stats with the caller's usage, refused at its limit with 413 `quota_exceeded` (naming
the quota) and nothing stored, and each user's or tenant's quota their own.

No documents are uploaded: every question is refused by the relevance gate, with no model run,
so a turn's stored size is known exactly (question, standalone question, refusal, no citations).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.harness import ApiFactory, ApiHarness, ApiUser, assert_error_body, sse_events

pytestmark = pytest.mark.integration

CONVERSATIONS = 2
MESSAGES = 4  # two turns
BYTES = 4000


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(
        start_workers=False,
        quota_conversations_per_user=CONVERSATIONS,
        quota_conversation_messages=MESSAGES,
        quota_conversation_bytes=BYTES,
    )


def _quotas(api: ApiHarness, user: ApiUser) -> dict[str, dict[str, int]]:
    response = api.client.get("/stats", headers=user.headers)
    assert response.status_code == 200, response.text
    quotas: dict[str, dict[str, int]] = response.json()["quotas"]
    return quotas


def _start(api: ApiHarness, user: ApiUser) -> Any:
    return api.client.post("/conversations", headers=user.headers)


def _started(api: ApiHarness, user: ApiUser) -> str:
    response = _start(api, user)
    assert response.status_code == 201, response.text
    conversation_id: str = response.json()["conversation_id"]
    return conversation_id


def _ask(api: ApiHarness, user: ApiUser, conversation_id: str, content: str, **params: Any) -> Any:
    return api.client.post(
        f"/conversations/{conversation_id}/messages",
        json={"content": content},
        headers=user.headers,
        params=params,
    )


def _messages(api: ApiHarness, user: ApiUser, conversation_id: str) -> list[dict[str, Any]]:
    response = api.client.get(f"/conversations/{conversation_id}", headers=user.headers)
    assert response.status_code == 200, response.text
    history: list[dict[str, Any]] = response.json()["history"]
    return history


def _count(api: ApiHarness, user: ApiUser) -> int:
    count: int = api.client.get("/conversations", headers=user.headers).json()["count"]
    return count


def _first_turn_bytes(api: ApiHarness, question: str) -> int:
    """What a conversation's first, refused turn stores: the question twice (it is its own
    standalone question), the refusal and an empty citation list."""
    texts = (question, question, api.settings.refusal_text, "[]")
    return sum(len(text.encode()) for text in texts)


def test_stats_show_the_conversation_quotas_with_the_callers_usage(api: ApiHarness) -> None:
    user = api.add_user("convq-stats", login=False)
    colleague = api.add_user("convq-stats", login=False)
    assert {name: q for name, q in _quotas(api, user).items() if "conversation" in name} == {
        "conversations": {"used": 0, "limit": CONVERSATIONS},
        "conversation_messages": {"used": 0, "limit": MESSAGES},
        "conversation_bytes": {"used": 0, "limit": BYTES},
    }
    conversation = _started(api, user)
    question = "How many towers does the castle have?"
    assert _ask(api, user, conversation, question).status_code == 200
    turn_bytes = _first_turn_bytes(api, question)
    mine = _quotas(api, user)
    assert mine["conversations"]["used"] == 1
    assert mine["conversation_messages"]["used"] == 2
    assert mine["conversation_bytes"]["used"] == turn_bytes
    # The per-user figures are the caller's; the bytes are the tenant's.
    theirs = _quotas(api, colleague)
    assert theirs["conversations"]["used"] == 0
    assert theirs["conversation_messages"]["used"] == 0
    assert theirs["conversation_bytes"]["used"] == turn_bytes
    stranger = api.add_user("convq-stats-other", login=False)
    assert _quotas(api, stranger)["conversation_bytes"]["used"] == 0


def test_a_user_at_the_conversation_quota_gets_413_and_no_conversation(api: ApiHarness) -> None:
    user = api.add_user("convq-count", login=False)
    kept = [_started(api, user) for _ in range(CONVERSATIONS)]  # at the limit: accepted
    refused = _start(api, user)
    error = assert_error_body(refused, 413, "quota_exceeded")
    assert "conversations" in error["message"] and str(CONVERSATIONS) in error["message"]
    assert _count(api, user) == CONVERSATIONS
    assert _quotas(api, user)["conversations"] == {"used": CONVERSATIONS, "limit": CONVERSATIONS}
    # The quota is per user: a colleague and a user of another tenant still start theirs.
    _started(api, api.add_user("convq-count", login=False))
    _started(api, api.add_user("convq-count-other", login=False))
    # Deleting one makes room for one.
    deleted = api.client.delete(f"/conversations/{kept[0]}", headers=user.headers)
    assert deleted.status_code == 204
    _started(api, user)
    assert_error_body(_start(api, user), 413, "quota_exceeded")


@pytest.mark.parametrize("stream", [False, True])
def test_a_full_conversation_refuses_the_next_turn_before_answering(
    api: ApiHarness, stream: bool
) -> None:
    user = api.add_user(f"convq-messages-{int(stream)}", login=False)
    conversation = _started(api, user)
    for n in range(MESSAGES // 2):  # up to the limit: stored
        assert _ask(api, user, conversation, f"question number {n}").status_code == 200
    before = _messages(api, user, conversation)
    refused = _ask(api, user, conversation, "one question too many", stream=str(stream).lower())
    # Refused before anything is streamed: a plain error body, not an event stream.
    error = assert_error_body(refused, 413, "quota_exceeded")
    assert "conversation_messages" in error["message"] and "new conversation" in error["message"]
    assert _messages(api, user, conversation) == before
    assert _quotas(api, user)["conversation_messages"] == {"used": MESSAGES, "limit": MESSAGES}
    # A new conversation of the same user takes questions again.
    assert _ask(api, user, _started(api, user), "a fresh start").status_code == 200


def test_the_tenant_bytes_quota_refuses_every_user_of_the_tenant_only(api: ApiHarness) -> None:
    user = api.add_user("convq-bytes", login=False)
    colleague = api.add_user("convq-bytes", login=False)
    long_question = "Where is valve number" + " seven" * 300 + "?"  # 1.8 KB asked, 3.7 KB kept
    assert _ask(api, user, _started(api, user), long_question).status_code == 200
    used = _quotas(api, user)["conversation_bytes"]["used"]
    assert used == _first_turn_bytes(api, long_question) and used <= BYTES
    theirs = _started(api, colleague)
    refused = _ask(api, colleague, theirs, long_question)
    error = assert_error_body(refused, 413, "quota_exceeded")
    assert "conversation_bytes" in error["message"]
    assert _messages(api, colleague, theirs) == []
    assert _quotas(api, colleague)["conversation_bytes"]["used"] == used
    # Another tenant has room of its own.
    stranger = api.add_user("convq-bytes-other", login=False)
    assert _ask(api, stranger, _started(api, stranger), long_question).status_code == 200


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_that_does_not_fit_is_not_stored(
    api: ApiHarness, api_factory: ApiFactory, stream: bool
) -> None:
    # The question fits what is left, the question with its answer does not: refused when the
    # answer is stored, with neither message kept.
    first, second = "What is the first question?", "And a second one?"
    limit = _first_turn_bytes(api, first) + len(second.encode()) + 1
    api = api_factory(start_workers=False, quota_conversation_bytes=limit)
    user = api.add_user("convq-late", login=False)
    assert _ask(api, user, _started(api, user), first).status_code == 200
    assert _quotas(api, user)["conversation_bytes"]["used"] == _first_turn_bytes(api, first)
    conversation = _started(api, user)
    response = _ask(api, user, conversation, second, stream=str(stream).lower())
    if stream:
        name, error = sse_events(response)[-1]
        assert name == "error" and error["code"] == "quota_exceeded"
        assert "conversation_bytes" in error["message"]
    else:
        error = assert_error_body(response, 413, "quota_exceeded")
        assert "conversation_bytes" in error["message"]
    assert _messages(api, user, conversation) == []
    assert _quotas(api, user)["conversation_bytes"]["used"] == _first_turn_bytes(api, first)


def test_starting_conversations_is_rate_limited_per_user(api_factory: ApiFactory) -> None:
    api = api_factory(start_workers=False, rate_limit_conversations_per_minute=3)
    user = api.add_user("convq-rate", login=False)
    for _ in range(3):
        _started(api, user)
    limited = _start(api, user)
    assert_error_body(limited, 429, "rate_limited")
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    assert _count(api, user) == 3
    # Another user of the same tenant has a rate of their own; asking in a conversation is not
    # starting one.
    _started(api, api.add_user("convq-rate", login=False))
    conversation = api.client.get("/conversations", headers=user.headers).json()["data"][0]
    assert _ask(api, user, conversation["conversation_id"], "still here?").status_code == 200
