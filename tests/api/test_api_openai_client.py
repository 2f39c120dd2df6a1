"""The official `openai` Python client against a live server: /v1/models, chat completions
plain and streamed (with citations), follow-ups from the message history, and clear errors."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from testkit.builders import text_document
from testkit.live_server import LiveServer, free_port
from tests.api.harness import ApiFactory

pytestmark = pytest.mark.integration

PASSWORD = "a long enough password"
CASTLE = text_document(
    "The Harrowgate castle has eleven towers and a moat fed by the river Lune.",
    "The Harrowgate castle was built in 1342 by the stonemason guild of Yarrow.",
)
HISTORY: list[Any] = [
    {"role": "user", "content": "How many towers does the Harrowgate castle have?"},
    {"role": "assistant", "content": "It has eleven towers [1]."},
    {"role": "user", "content": "When was it built?"},
]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("live-openai") / "data")
    server.create_user("chat", "chatter", PASSWORD)
    with server.running():
        yield server


@pytest.fixture(scope="module")
def token(live: LiveServer) -> str:
    response = httpx.post(
        f"{live.url}/auth/token", data={"username": "chatter", "password": PASSWORD}
    )
    assert response.status_code == 200, response.text
    access: str = response.json()["access_token"]
    headers = {"Authorization": f"Bearer {access}"}
    upload = httpx.post(
        f"{live.url}/documents", files={"file": ("castle.txt", CASTLE)}, headers=headers
    )
    assert upload.status_code == 202, upload.text
    job_id = upload.json()["job_id"]
    deadline = time.monotonic() + 180
    while (job := httpx.get(f"{live.url}/jobs/{job_id}", headers=headers).json())["status"] in (
        "queued",
        "processing",
    ):
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    assert job["status"] == "done", job
    return access


@pytest.fixture(scope="module")
def client(live: LiveServer, token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key=token, max_retries=0, timeout=120)


def test_models_lists_what_the_service_offers(client: openai.OpenAI) -> None:
    # `rag` reads every collection the caller reads; `rag:<name>` one of them.
    assert [model.id for model in client.models.list()] == ["rag", "rag:general"]


def test_a_model_is_retrieved_by_its_id_and_a_missing_one_is_a_404(
    client: openai.OpenAI,
) -> None:
    # What an SDK's models.retrieve() and front-ends that check the configured model ask.
    for model in ("rag", "rag:general"):
        found = client.models.retrieve(model)
        assert (found.id, found.object) == (model, "model")
    for missing in ("gpt-4o", "rag:no-such-collection"):
        with pytest.raises(openai.NotFoundError) as caught:
            client.models.retrieve(missing)
        assert caught.value.code == "not_found" and missing in str(caught.value)


def test_a_follow_up_completion_is_answered_with_citations(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(model="rag", messages=HISTORY)
    answer = completion.choices[0].message.content
    assert answer is not None and "1342" in answer and "[1]" in answer
    assert completion.choices[0].finish_reason == "stop"
    extra = completion.model_extra or {}
    assert [c["source"] for c in extra["citations"]] == ["castle.txt"]
    assert extra["citations"][0]["marker"] == 1
    assert "Harrowgate castle" in extra["standalone_question"]


def test_a_streamed_completion_ends_with_its_citations(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(model="rag", messages=HISTORY, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "1342" in text
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    extra = last.model_extra or {}
    assert [c["source"] for c in extra["citations"]] == ["castle.txt"]
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    # The plain completion of the same messages says the same (the stream filled the cache).
    plain = client.chat.completions.create(model="rag", messages=HISTORY)
    assert plain.choices[0].message.content == text


def test_a_streamed_completion_names_the_model_it_was_asked_for(client: openai.OpenAI) -> None:
    # A collection's model: every chunk says it, as the plain completion does.
    chunks = list(
        client.chat.completions.create(model="rag:general", messages=HISTORY, stream=True)
    )
    plain = client.chat.completions.create(model="rag:general", messages=HISTORY)
    assert plain.model == "rag:general"
    assert {c.model for c in chunks} == {"rag:general"}


def test_messages_given_as_text_parts_are_read_as_their_text(client: openai.OpenAI) -> None:
    # OpenAI's other form of `content`, which chat front-ends and agent frameworks send.
    parts: Any = [
        {"role": "user", "content": [{"type": "text", "text": HISTORY[0]["content"]}]},
        {"role": "assistant", "content": [{"type": "text", "text": HISTORY[1]["content"]}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "When was"},
                {"type": "text", "text": "it built?"},
            ],
        },
    ]
    for stream in (False, True):
        if stream:
            chunks = list(client.chat.completions.create(model="rag", messages=parts, stream=True))
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            extra = chunks[-1].model_extra or {}
        else:
            completion = client.chat.completions.create(model="rag", messages=parts)
            text = completion.choices[0].message.content or ""
            extra = completion.model_extra or {}
        assert "1342" in text, text
        assert "Harrowgate castle" in extra["standalone_question"]
        assert "When was\nit built?" in extra["standalone_question"]
    # A picture is not read: said so, not answered as if the question were empty.
    picture: Any = [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}],
        }
    ]
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.chat.completions.create(model="rag", messages=picture)
    assert "only text parts" in str(caught.value) and "image_url" in str(caught.value)
    assert caught.value.code == "validation_error"


def test_a_wrong_key_raises_an_authentication_error(live: LiveServer) -> None:
    stranger = openai.OpenAI(base_url=f"{live.url}/v1", api_key="not-a-token", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        stranger.chat.completions.create(model="rag", messages=HISTORY)
    # The service's envelope: the client shows its message and keeps its stable code.
    assert "invalid or expired token" in str(caught.value)
    assert caught.value.code == "unauthorized"


def test_bad_requests_raise_clear_errors_plain_and_streamed(
    client: openai.OpenAI, live: LiveServer
) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as unknown_model:
        client.chat.completions.create(model="gpt-4o", messages=HISTORY)
    assert "unknown model 'gpt-4o'" in str(unknown_model.value)
    assert unknown_model.value.code == "invalid_input"
    too_long: Any = [{"role": "user", "content": "x" * 2001}]
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.chat.completions.create(model="rag", messages=too_long, stream=True)
    assert "longer than 2000 characters" in str(caught.value)


def test_a_failure_mid_stream_raises_an_api_error(api_factory: ApiFactory) -> None:
    # The answer model is an OpenAI-compatible server that is not there: the stream has begun
    # (200, first chunk) when generation fails, so the error arrives as a `data:` line.
    api = api_factory(
        llm_provider="openai",
        llm_model="absent",
        openai_api_key="unused",
        openai_base_url=f"http://127.0.0.1:{free_port()}/v1",
    )
    user = api.add_user("chat-down", login=False)
    assert api.upload_and_wait(user, "castle.txt", CASTLE)["status"] == "done"
    in_process = openai.OpenAI(
        base_url="http://testserver/v1", api_key=user.token, http_client=api.client, max_retries=0
    )
    with pytest.raises(openai.APIError) as caught:
        list(in_process.chat.completions.create(model="rag", messages=HISTORY, stream=True))
    assert type(caught.value) is openai.APIError  # raised from the stream, not a status
    assert "unavailable" in str(caught.value)


def test_an_api_key_works_as_the_sdks_api_key_until_it_is_revoked(
    live: LiveServer, token: str
) -> None:
    session = {"Authorization": f"Bearer {token}"}
    created = httpx.post(
        f"{live.url}/auth/keys", json={"name": "openai sdk", "role": "reader"}, headers=session
    )
    assert created.status_code == 201, created.text
    key = created.json()
    sdk = openai.OpenAI(base_url=f"{live.url}/v1", api_key=key["key"], max_retries=0, timeout=120)

    assert [model.id for model in sdk.models.list()] == ["rag", "rag:general"]
    plain = sdk.chat.completions.create(model="rag", messages=HISTORY)
    answer = plain.choices[0].message.content
    assert answer is not None and "1342" in answer
    chunks = list(sdk.chat.completions.create(model="rag", messages=HISTORY, stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == answer and chunks[-1].choices[0].finish_reason == "stop"

    revoked = httpx.delete(f"{live.url}/auth/keys/{key['key_id']}", headers=session)
    assert revoked.status_code == 204
    with pytest.raises(openai.AuthenticationError) as caught:
        sdk.models.list()
    assert caught.value.code == "unauthorized"
    assert key["key"] not in str(caught.value)
    with pytest.raises(openai.AuthenticationError):
        sdk.chat.completions.create(model="rag", messages=HISTORY)
