"""The `openai` provider against a real OpenAI-compatible server: llama-cpp-python's
`llama_cpp.server` on the shipped GGUF, started on a free port and killed afterwards.

Built through the normal factory (RAG_LLM_PROVIDER=openai, base URL, model, API key), the
provider refuses what the passages do not cover, keeps the configured length, gives up on a
server that does not start answering in time, and turns a wrong API key into a clear error.
What every chat-server provider does (cited streaming, the deadline, a server killed
mid-answer) is in test_chat_servers.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import Settings, load_settings
from app.errors import GenerationTimeout, ProviderUnavailable
from app.generation.grounded_answer import final_answer
from app.providers.llms import build_llm
from app.providers.types import LLM, ChatMessage, ChatRequest
from tests.providers.llm_servers import API_KEY, SERVED_MODEL, ServerProcess, stream_over_paris

pytestmark = pytest.mark.slow

# A short prompt with a long answer: tokens keep coming, each read is quick.
COUNTING = ChatRequest(
    messages=(ChatMessage("user", "Count from 1 to 300, separated by commas. Nothing else."),),
)


def _settings(server: ServerProcess, tmp: Path, **changes: object) -> Settings:
    values: dict[str, object] = {
        "llm_provider": "openai",
        "llm_model": SERVED_MODEL,
        "openai_base_url": server.root_url + "/v1",
        "openai_api_key": API_KEY,
        "llm_timeout_s": 300.0,
    }
    values.update(changes)
    return load_settings(_env_file=None, data_dir=tmp, **values)


def _llm(server: ServerProcess, tmp: Path, **changes: object) -> LLM:
    return build_llm(_settings(server, tmp, **changes))


def test_question_the_passages_do_not_cover_gets_the_refusal(
    llama_server: ServerProcess, tmp_path: Path
) -> None:
    settings = _settings(llama_server, tmp_path)
    answer = final_answer(stream_over_paris(settings, "What is the population of Berlin?"))
    print(repr(answer.text))
    assert answer.refused
    assert answer.text == settings.refusal_text and answer.citations == []


def test_answer_stops_at_the_configured_length(llama_server: ServerProcess, tmp_path: Path) -> None:
    # llama.cpp's server ignores `max_completion_tokens`; without `max_tokens` it counted on.
    llm = _llm(llama_server, tmp_path, llm_max_tokens=12)
    pieces = [delta.text for delta in llm.stream(COUNTING)]
    text = "".join(pieces)
    print(repr(text))
    assert 0 < len([p for p in pieces if p]) <= 12
    assert "1" in text and "30," not in text


def test_wrong_api_key_is_an_authentication_error_without_the_key(
    llama_server: ServerProcess, tmp_path: Path
) -> None:
    wrong = "sk-wrong-key-93e1d0"
    llm = _llm(llama_server, tmp_path, openai_api_key=wrong)
    with pytest.raises(ProviderUnavailable, match="authentication failed, HTTP 401") as caught:
        list(llm.stream(COUNTING))
    assert wrong not in str(caught.value) and API_KEY not in str(caught.value)
    assert not isinstance(caught.value, GenerationTimeout)


def test_server_that_does_not_start_answering_in_time_times_out(
    llama_server: ServerProcess, tmp_path: Path
) -> None:
    # The full RAG prompt takes the model seconds to read before its first token. The client
    # gives up after its read timeout instead of waiting, and sends the request at most twice
    # (one retry), as the server's access log shows.
    settings = _settings(llama_server, tmp_path, llm_timeout_s=0.5)
    before = _completion_requests(llama_server)
    with pytest.raises(GenerationTimeout, match="timed out"):
        final_answer(stream_over_paris(settings, "When was the Eiffel Tower completed?"))
    assert 1 <= _completion_requests(llama_server) - before <= 2


def _completion_requests(server: ServerProcess) -> int:
    """Chat completion requests the server has logged so far."""
    log = server.log.read_text(encoding="utf-8", errors="replace")
    return log.count('"POST /v1/chat/completions')
