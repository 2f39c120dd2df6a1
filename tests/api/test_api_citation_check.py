"""The citation check on the real stack (Chroma, the shipped embedder, a scripted model): a
marker on a claim that only the embedder can place is pointed at the passage that says it, in
the answer and in the stream alike."""

from __future__ import annotations

from typing import Any

import pytest

from app.providers.types import ChatRequest
from testkit.builders import pdf_document
from tests.api.harness import ApiFactory, ApiHarness, ApiUser, sse_events
from tests.fakes import FakeLLM

pytestmark = pytest.mark.integration

# Page 1 is about the client library's codes, page 2 says which sign the library's own have.
CLIENT_CODES = (
    "The library retrieves and stores the error codes of the database client if the client "
    "provides error codes in a suitable format."
)
OWN_CODES = (
    "Client errors use positive error numbers, whereas errors raised by the library itself use "
    "negative error numbers."
)
QUESTION = "Are the library's own error codes positive or negative?"
# Every word of the claim is the question's: the term checks cannot tell the pages apart.
CLAIM = "The library's own error codes are negative"


def _cites_client_codes(request: ChatRequest) -> str:
    """The claim, marked with the number of the passage about the client's codes."""
    assert request.grounding is not None
    passages = request.grounding.passages
    number = next(n for n, text in enumerate(passages, start=1) if "retrieves" in text)
    assert len(passages) == 2, passages  # both pages are shown, so the marker has a choice
    return f"{CLAIM} [{number}]."


@pytest.fixture(scope="module")
def app_and_reader(api_factory: ApiFactory) -> tuple[ApiHarness, ApiUser]:
    api = api_factory()
    api.container.__dict__["llm"] = FakeLLM(_cites_client_codes)  # before the first answer
    reader = api.add_user("citations")
    document = pdf_document(CLIENT_CODES, OWN_CODES)
    assert api.upload_and_wait(reader, "errors.pdf", document)["status"] == "done"
    return api, reader


def _pages(citations: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(c["source"], c["page"]) for c in citations]


def test_a_marker_is_pointed_at_the_page_the_embedder_finds_closer(
    app_and_reader: tuple[ApiHarness, ApiUser],
) -> None:
    api, reader = app_and_reader
    body = api.query(reader, QUESTION)

    assert body["answer"] == f"{CLAIM} [1]."
    assert _pages(body["citations"]) == [("errors.pdf", 2)]  # the model's marker named page 1


def test_the_stream_shows_the_same_re_pointed_marker(
    app_and_reader: tuple[ApiHarness, ApiUser],
) -> None:
    api, reader = app_and_reader
    # Another wording of the question: a new answer, not the cached one.
    question = "Are the library's own error codes negative or positive?"
    response = api.client.post("/query/stream", json={"question": question}, headers=reader.headers)
    events = sse_events(response)

    streamed = "".join(data["text"] for name, data in events if name == "token")
    citations = next(data["citations"] for name, data in events if name == "citations")
    assert streamed == f"{CLAIM} [1]."
    assert _pages(citations) == [("errors.pdf", 2)]
