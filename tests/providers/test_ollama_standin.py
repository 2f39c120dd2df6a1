"""The `ollama` provider against a local stand-in of Ollama's HTTP API (`ollama_standin`:
no real Ollama server can run here, see its docstring), served from a child process.

Relayed to the shipped model, the provider gives a real cited answer in Ollama's wire format;
scripted replies show streaming as it arrives, the deadline, a model the server does not have,
and a server killed mid-answer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import Settings, load_settings
from app.errors import GenerationTimeout, ProviderUnavailable
from app.generation.grounded_answer import AnswerDelta, AnswerDone, stream_answer
from app.generation.prompt import build_request
from app.providers.llms import ChatServerLLM, build_llm
from app.providers.types import LLM
from tests.fake_clock import FakeClock
from tests.generation.generation_builders import PARIS, relevant
from tests.providers.llm_servers import ServerProcess, start_ollama_standin
from tests.providers.ollama_standin import RELAYED_MODEL

pytestmark = pytest.mark.integration

SCRIPTED = "scripted:1b"
REPLY = "The Eiffel Tower was completed in 1889 [1]."
PAUSE_S = 0.3  # between the scripted reply's words
EIFFEL = build_request("When was the Eiffel Tower completed?", relevant(PARIS).hits, "No.")


@pytest.fixture(scope="module")
def scripted_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_ollama_standin(
        tmp_path_factory.mktemp("ollama"), scripts={SCRIPTED: REPLY}, pause_s=PAUSE_S
    )
    yield server
    server.stop()


def _settings(server: ServerProcess, tmp: Path, **changes: object) -> Settings:
    values: dict[str, object] = {
        "llm_provider": "ollama",
        "llm_model": SCRIPTED,
        "ollama_base_url": server.root_url,
        "llm_timeout_s": 300.0,
    }
    values.update(changes)
    return load_settings(_env_file=None, data_dir=tmp, **values)


def _stream(llm: LLM, settings: Settings) -> tuple[list[tuple[float, str]], AnswerDone]:
    """The timed deltas and the final event of one answer about the Eiffel Tower."""
    deltas: list[tuple[float, str]] = []
    done = None
    for event in stream_answer(
        "When was the Eiffel Tower completed?",
        relevant(PARIS),
        llm,
        refusal_text=settings.refusal_text,
    ):
        if isinstance(event, AnswerDelta):
            deltas.append((time.monotonic(), event.text))
        elif isinstance(event, AnswerDone):
            done = event
    assert done is not None
    return deltas, done


def test_scripted_answer_streams_word_by_word_with_its_citation(
    scripted_server: ServerProcess, tmp_path: Path
) -> None:
    settings = _settings(scripted_server, tmp_path)
    deltas, done = _stream(build_llm(settings), settings)
    answer = done.answer
    assert answer.text == REPLY and not answer.refused
    assert [c.source for c in answer.citations] == ["eiffel.pdf"]
    assert answer.model_id == f"ollama:{SCRIPTED}"
    # The final line's prompt_eval_count reaches the answer.
    assert answer.prompt_tokens is not None and answer.prompt_tokens > 50
    # Delivered as the server sends each word, not collected until the end.
    words = len(REPLY.split(" "))
    assert len(deltas) >= words - 1
    assert deltas[-1][0] - deltas[0][0] > PAUSE_S * (words - 2) * 0.8


def test_model_the_server_does_not_have_is_a_clear_error(
    scripted_server: ServerProcess, tmp_path: Path
) -> None:
    llm = build_llm(_settings(scripted_server, tmp_path, llm_model="llama3.3:70b"))
    with pytest.raises(ProviderUnavailable, match=r'model "llama3.3:70b" not found') as caught:
        _stream(llm, _settings(scripted_server, tmp_path))
    assert not isinstance(caught.value, GenerationTimeout)


def test_answer_longer_than_the_deadline_times_out(
    scripted_server: ServerProcess, tmp_path: Path
) -> None:
    # Each word comes within the client's read timeout; the deadline bounds the whole answer.
    # The answer's clock moves one scripted pause at each reading: at the start and per word.
    llm = build_llm(_settings(scripted_server, tmp_path, llm_timeout_s=1.0))
    assert isinstance(llm, ChatServerLLM)
    llm.clock = FakeClock(tick=PAUSE_S)
    received: list[str] = []
    with pytest.raises(GenerationTimeout, match="did not finish within 1 s"):
        for delta in llm.stream(EIFFEL):
            received.append(delta.text)
    # Readings at 0.3, 0.6 and 0.9 s pass; the one at 1.2 s stops the answer mid-reply.
    assert 1 <= len(received) <= 3
    assert len("".join(received)) < len(REPLY)


def test_server_killed_mid_answer_is_provider_unavailable(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    server = start_ollama_standin(
        tmp_path_factory.mktemp("doomed-ollama"), scripts={SCRIPTED: REPLY}, pause_s=1.0
    )
    try:
        # The answer's clock stands still, so only the dead connection can end the stream; a
        # client that missed it would wait out its 300 s read timeout and raise a timeout.
        llm = build_llm(_settings(server, tmp_path))
        assert isinstance(llm, ChatServerLLM)
        llm.clock = FakeClock()
        received: list[str] = []
        with pytest.raises(ProviderUnavailable, match="is unavailable") as caught:
            for delta in llm.stream(EIFFEL):
                received.append(delta.text)
                if len(received) == 2:
                    server.kill()
        print(f"after {received}: {caught.value}")
        assert len(received) == 2
        assert not isinstance(caught.value, GenerationTimeout)
    finally:
        server.kill()


@pytest.mark.slow
def test_real_model_answers_through_the_ollama_protocol(
    llama_server: ServerProcess, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    standin = start_ollama_standin(tmp_path_factory.mktemp("ollama-relay"), relay=llama_server)
    try:
        settings = _settings(standin, tmp_path, llm_model=RELAYED_MODEL)
        deltas, done = _stream(build_llm(settings), settings)
    finally:
        standin.stop()
    answer = done.answer
    print(f"{answer.text!r} in {len(deltas)} deltas, {answer.prompt_tokens} prompt tokens")
    assert not answer.refused and "1889" in answer.text
    assert [c.source for c in answer.citations] == ["eiffel.pdf"]
    assert len(deltas) >= 5 and deltas[-1][0] - deltas[0][0] > 0.2
    assert answer.prompt_tokens is not None and answer.prompt_tokens > 100
