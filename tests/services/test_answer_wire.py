"""The typed answer results become exactly the bytes clients have always received.

Golden frames: the SSE events and the cache's stored form are a contract with clients (and with
answers other processes cached), so a refactor of the service must not move a key or an escape.
"""

from __future__ import annotations

import pytest

from app.api.routes.answers import _sse, wire_event
from app.api.schemas import QueryOut
from app.generation.citations import Citation
from app.observability import request_id_var
from app.services.answer import (
    AnsweredQuestion,
    AnswerFailed,
    AnswerFinished,
    CachedAnswer,
    CitationsFound,
    TextDelta,
)

pytestmark = pytest.mark.unit

CITATION = Citation(1, "doc-1", "تقرير.pdf", 3, "iii", "المد يبلغ 40 سم", "c" * 32)
CITATION_JSON = (
    '{"marker": 1, "document_id": "doc-1", "source": "تقرير.pdf", "page": 3, '
    '"page_label": "iii", "snippet": "المد يبلغ 40 سم", "chunk_id": "' + "c" * 32 + '"}'
)


def _frame(event: object) -> str:
    return _sse(*wire_event(event)).decode()  # type: ignore[arg-type]


def test_each_event_is_the_frame_clients_parse() -> None:
    assert _frame(TextDelta("المد [1]")) == 'event: token\ndata: {"text": "المد [1]"}\n\n'
    assert _frame(CitationsFound([CITATION], False)) == (
        f'event: citations\ndata: {{"citations": [{CITATION_JSON}], "refused": false}}\n\n'
    )
    finished = AnswerFinished(True, "hit", {"cache": 1.25}, 2.5, "a" * 32)
    assert _frame(finished) == (
        'event: done\ndata: {"refused": true, "cache": "hit", "timings": {"cache": 1.25}, '
        '"total_ms": 2.5, "answer_id": "' + "a" * 32 + '"}\n\n'
    )


def test_a_failure_frame_names_the_request_id_only_for_server_errors() -> None:
    token = request_id_var.set("req-42")
    try:
        client_error = _frame(AnswerFailed("invalid_input", "bad k", 422))
        server_error = _frame(AnswerFailed("internal_error", "internal error", 500))
    finally:
        request_id_var.reset(token)
    assert client_error == 'event: error\ndata: {"code": "invalid_input", "message": "bad k"}\n\n'
    assert server_error == (
        'event: error\ndata: {"code": "internal_error", "message": "internal error '
        '(request id req-42)", "request_id": "req-42"}\n\n'
    )


def test_the_query_body_keeps_its_keys_and_their_order() -> None:
    answer_id = "b" * 32
    answered = AnsweredQuestion(
        "المد [1]", [CITATION], False, "miss", {"generate": 3.0}, 4.0, answer_id
    )
    body = QueryOut.model_validate(answered).model_dump_json()
    compact_citation = CITATION_JSON.replace(": ", ":").replace(", ", ",")
    assert body == (
        f'{{"answer":"المد [1]","citations":[{compact_citation}],'
        '"refused":false,"cache":"miss","timings":{"generate":3.0},"total_ms":4.0,'
        f'"answer_id":"{answer_id}"}}'
    )


def test_the_stored_form_is_unchanged_and_reads_back() -> None:
    retrieved = [{"rank": 1, "document_id": "d" * 32, "source": "tides.pdf", "page": 1}]
    answer = CachedAnswer("المد [1]", [CITATION], False, retrieved)
    stored = answer.to_cache()
    assert list(stored) == ["answer", "citations", "refused", "retrieved"]
    assert stored["citations"][0]["chunk_id"] == "c" * 32
    assert CachedAnswer.from_cache(stored) == answer
    # An entry written before citations carried chunk ids, or with a key added later, still reads.
    legacy = {**stored, "citations": [{**stored["citations"][0], "extra": 1}]}
    del legacy["citations"][0]["chunk_id"]
    assert CachedAnswer.from_cache(legacy).citations[0].chunk_id == ""
    # An entry cached before answers kept their retrieved documents reads back with none.
    del legacy["retrieved"]
    assert CachedAnswer.from_cache(legacy).retrieved == []
