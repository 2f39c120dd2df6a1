"""What every chat-server LLM provider must do, run on each against its real local server: `openai`
against llama-cpp-python's OpenAI-compatible server on the shipped GGUF, `ollama` against the
Ollama stand-in relaying to that same server (a real answer in Ollama's wire format).

Built through the normal factory, each provider streams a cited answer as the model generates
it, ends an answer that outlasts the deadline with a timeout,
and turns a server killed mid-answer into "unavailable", not a timeout. What only one provider
has stays in its own file: test_openai_server.py and test_ollama_standin.py."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.config import Settings, load_settings
from app.errors import GenerationTimeout, ProviderUnavailable
from app.generation.grounded_answer import AnswerDelta, AnswerDone
from app.providers.llms import ChatServerLLM, build_llm
from app.providers.types import ChatMessage, ChatRequest
from tests.fake_clock import FakeClock
from tests.providers.llm_servers import (
    API_KEY,
    SERVED_MODEL,
    ServerProcess,
    start_llama_server,
    start_ollama_standin,
    stream_over_paris,
)
from tests.providers.ollama_standin import RELAYED_MODEL

pytestmark = pytest.mark.slow

# A short prompt with a long answer: tokens keep coming, each read is quick.
COUNTING = ChatRequest(
    messages=(ChatMessage("user", "Count from 1 to 300, separated by commas. Nothing else."),),
)


@dataclass(frozen=True)
class ChatServer:
    """One provider's running server, and how to start another of its kind."""

    provider: str
    model: str
    server: ServerProcess
    start_another: Callable[[Path], ServerProcess]

    def settings(
        self, tmp: Path, server: ServerProcess | None = None, **changes: object
    ) -> Settings:
        """Settings selecting this provider on `server` (by default the running one)."""
        url = (server or self.server).root_url
        values: dict[str, object] = {
            "llm_provider": self.provider,
            "llm_model": self.model,
            "llm_timeout_s": 300.0,
        }
        if self.provider == "openai":
            values.update(openai_base_url=url + "/v1", openai_api_key=API_KEY)
        else:
            values.update(ollama_base_url=url)
        values.update(changes)
        return load_settings(_env_file=None, data_dir=tmp, **values)


@pytest.fixture(scope="module")
def ollama_relay(
    llama_server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """The Ollama stand-in relaying to the session's llama.cpp server."""
    standin = start_ollama_standin(tmp_path_factory.mktemp("ollama-relay"), relay=llama_server)
    yield standin
    standin.stop()


@pytest.fixture(params=["openai", "ollama"])
def chat_server(request: pytest.FixtureRequest, llama_server: ServerProcess) -> ChatServer:
    if request.param == "openai":
        return ChatServer("openai", SERVED_MODEL, llama_server, start_llama_server)
    return ChatServer(
        "ollama",
        RELAYED_MODEL,
        request.getfixturevalue("ollama_relay"),
        lambda log_dir: start_ollama_standin(log_dir, relay=llama_server),
    )


def test_answer_is_cited_and_streamed_as_it_is_generated(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    settings = chat_server.settings(tmp_path)
    arrivals: list[float] = []
    deltas: list[str] = []
    answer = None
    for event in stream_over_paris(settings, "When was the Eiffel Tower completed?"):
        if isinstance(event, AnswerDelta):
            arrivals.append(time.monotonic())
            deltas.append(event.text)
        elif isinstance(event, AnswerDone):
            answer = event.answer
    assert answer is not None
    print(f"{answer.text!r} in {len(deltas)} deltas over {arrivals[-1] - arrivals[0]:.1f} s")
    assert not answer.refused
    assert "1889" in answer.text
    assert "[1]" in answer.text  # a marker the model wrote, valid for the 3 passages given
    assert [c.source for c in answer.citations] == ["eiffel.pdf"]
    assert answer.model_id == f"{chat_server.provider}:{chat_server.model}"
    # Token by token as the server generates, not one block at the end.
    assert len(deltas) >= 5
    assert arrivals[-1] - arrivals[0] > 0.2
    assert "".join(deltas) == answer.text


def test_answer_longer_than_the_deadline_times_out(chat_server: ChatServer, tmp_path: Path) -> None:
    # Tokens arrive well within the client's read timeout (the same 300 s); the deadline bounds
    # the whole answer. Its clock moves 50 s at each reading: at the start and per token.
    llm = build_llm(chat_server.settings(tmp_path, llm_max_tokens=2000))
    assert isinstance(llm, ChatServerLLM)
    llm.clock = FakeClock(tick=50.0)
    received: list[str] = []
    with pytest.raises(GenerationTimeout, match="did not finish within 300 s"):
        for delta in llm.stream(COUNTING):
            received.append(delta.text)
    print(f"{len(received)} deltas before the deadline")
    # Six readings fit in the 300 s; the seventh stops the answer (counting to 300 goes on).
    assert 1 <= len(received) <= 6


def test_server_killed_mid_answer_is_provider_unavailable(
    chat_server: ChatServer, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    server = chat_server.start_another(tmp_path_factory.mktemp("doomed-server"))
    try:
        # The answer's clock stands still, so only the dead connection can end the stream; a
        # client that missed it would wait out its 300 s read timeout and raise a timeout.
        llm = build_llm(chat_server.settings(tmp_path, server))
        assert isinstance(llm, ChatServerLLM)
        llm.clock = FakeClock()
        received: list[str] = []
        with pytest.raises(ProviderUnavailable, match="is unavailable") as caught:
            for delta in llm.stream(COUNTING):
                received.append(delta.text)
                if len(received) == 3:
                    server.kill()
        print(f"after {len(received)} deltas: {caught.value}")
        assert len(received) >= 3
        assert not isinstance(caught.value, GenerationTimeout)
    finally:
        server.kill()
