"""The `ollama` provider against a local stand-in of Ollama's HTTP API (`ollama_standin`:
no real Ollama server can run here, see its docstring), served from a child process.

What every chat-server provider does (a real cited answer streamed as it is generated, the
deadline, a server killed mid-answer) runs on the stand-in relaying to the shipped model in
test_chat_servers.py; here is what only Ollama's API has: the prompt's token count in its last
line (llama.cpp's OpenAI-compatible server sends none while streaming), and a model the server
does not have."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import Settings, load_settings
from app.errors import GenerationTimeout, ProviderUnavailable
from app.generation.grounded_answer import final_answer
from app.generation.prompt import build_request
from app.providers.llms import build_llm
from tests.generation.generation_builders import PARIS, relevant
from tests.providers.llm_servers import ServerProcess, start_ollama_standin, stream_over_paris

pytestmark = pytest.mark.integration

SCRIPTED = "scripted:1b"
REPLY = "The Eiffel Tower was completed in 1889 [1]."
EIFFEL = build_request("When was the Eiffel Tower completed?", relevant(PARIS).hits, "No.")


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_ollama_standin(tmp_path_factory.mktemp("ollama"), scripts={SCRIPTED: REPLY})
    yield server
    server.stop()


def _settings(server: ServerProcess, tmp: Path, model: str = SCRIPTED) -> Settings:
    return load_settings(
        _env_file=None,
        data_dir=tmp,
        llm_provider="ollama",
        llm_model=model,
        ollama_base_url=server.root_url,
    )


def test_answer_carries_the_prompt_token_count_the_server_reports(
    standin: ServerProcess, tmp_path: Path
) -> None:
    settings = _settings(standin, tmp_path)
    answer = final_answer(stream_over_paris(settings, "When was the Eiffel Tower completed?"))
    assert answer.text == REPLY and [c.source for c in answer.citations] == ["eiffel.pdf"]
    # The stand-in counts the prompt as Ollama does (`prompt_eval_count` on the last line).
    assert answer.prompt_tokens is not None and answer.prompt_tokens > 50


def test_model_the_server_does_not_have_is_a_clear_error(
    standin: ServerProcess, tmp_path: Path
) -> None:
    llm = build_llm(_settings(standin, tmp_path, model="llama3.3:70b"))
    with pytest.raises(ProviderUnavailable, match=r'model "llama3.3:70b" not found') as caught:
        list(llm.stream(EIFFEL))
    assert not isinstance(caught.value, GenerationTimeout)
