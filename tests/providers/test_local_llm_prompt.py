"""The local model renders each chat prompt once and feeds its tokens to llama.cpp: the tokens,
the stops and the replies are exactly those of llama-cpp-python's own chat completion, which
rendered the template again itself (the shipped GGUF, real llama.cpp)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.config import load_settings
from app.domain import SearchHit
from app.generation.prompt import build_request
from app.providers.gguf import ensure_default_model
from app.providers.llms import LlamaCppLLM, _as_dicts, _LocalModel
from app.providers.types import ChatMessage, ChatRequest
from tests.generation.generation_builders import make_hits

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
REFUSAL = load_settings(_env_file=None).refusal_text
PASSAGES = [
    "The Eiffel Tower was completed in 1889. It is 330 metres tall and was designed by the "
    "engineering company of Gustave Eiffel.",
    "برج إيفل برج حديدي في باريس، اكتمل بناؤه عام 1889 ويبلغ ارتفاعه 330 متراً.",
]
REWRITE = ChatRequest(
    messages=(
        ChatMessage("system", "Rewrite the follow-up question as a standalone question."),
        ChatMessage("user", "User: Who built the Eiffel Tower?\nUser's last question: when?"),
        ChatMessage("assistant", "When was the Eiffel Tower built?"),
        ChatMessage("user", "User: Where is Petra?\nUser's last question: how old is it?"),
    ),
    stop=("\n\n",),
    shared_prefix=3,
)
PLAIN_CHAT = ChatRequest(messages=(ChatMessage("user", "Say hello in one word."),))


def _hits() -> list[SearchHit]:
    return make_hits(
        [(f"doc{rank}.pdf", rank + 1, str(rank + 1), text) for rank, text in enumerate(PASSAGES)]
    )


REQUESTS = {
    "answer, English": build_request("When was the Eiffel Tower completed?", _hits(), REFUSAL),
    "answer, Arabic": build_request("متى اكتمل بناء برج إيفل؟", _hits(), REFUSAL),
    "follow-up rewrite": REWRITE,
    "plain chat": PLAIN_CHAT,
}


@pytest.fixture(scope="module")
def model() -> Iterator[_LocalModel]:
    """A model of its own (not the process-wide shared one)."""
    models_dir = ROOT / "models"
    local = _LocalModel(lambda: ensure_default_model(models_dir), 4096, 2)
    with local.lock:
        local.loaded()
    yield local


class _Fed(Exception):
    """Raised in place of decoding: what llama-cpp-python was about to evaluate is captured."""


def _fed_by_chat_completion(
    model: _LocalModel, request: ChatRequest, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """What `create_chat_completion` (the earlier path) hands to `create_completion`."""
    captured: dict[str, Any] = {}

    def capture(**kwargs: Any) -> None:
        captured.update(kwargs)
        raise _Fed

    with monkeypatch.context() as patch:
        patch.setattr(model.llama, "create_completion", capture)
        with pytest.raises(_Fed):
            model.llama.create_chat_completion(
                messages=_as_dicts(request.messages), stop=list(request.stop), stream=True
            )
    return captured


@pytest.mark.parametrize("name", list(REQUESTS))
def test_the_prompt_rendered_once_is_what_llama_cpp_rendered_itself(
    model: _LocalModel, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = REQUESTS[name]
    messages = _as_dicts(request.messages)
    prompt = model.render(messages)
    assert prompt is not None
    fed = _fed_by_chat_completion(model, request, monkeypatch)
    assert prompt.tokens == list(fed["prompt"]) and len(prompt.tokens) > 10
    assert [*request.stop, *prompt.stop] == fed["stop"] == [*request.stop, "<|im_end|>"]
    # Both stop on the end-of-turn token, and only on it.
    end = model.llama.token_eos()
    for criteria in (prompt.stopping_criteria, fed["stopping_criteria"]):
        assert criteria(np.array([9707, end]), None)
        assert not criteria(np.array([end, 9707]), None)
    if request.shared_prefix:
        # The saved prefix is still found in the one rendering: the fixed messages only.
        prefix = model.shared_prefix_tokens(messages, request.shared_prefix, prompt)
        assert prefix is not None and 0 < len(prefix) < len(prompt.tokens)
        assert prompt.tokens[: len(prefix)] == list(prefix)
        shared_text = model.llama.detokenize(list(prefix), special=True).decode("utf-8")
        assert request.messages[request.shared_prefix - 1].content in shared_text
        assert request.messages[request.shared_prefix].content not in shared_text


@pytest.mark.parametrize("name", ["follow-up rewrite", "plain chat"])
def test_the_reply_is_the_one_llama_cpp_chat_completion_gives(
    model: _LocalModel, name: str
) -> None:
    request = REQUESTS[name]
    llm = LlamaCppLLM(model, model_id="test", max_tokens=24, timeout_s=900)
    reply = "".join(delta.text for delta in llm.stream(request))
    chunks = model.llama.create_chat_completion(
        messages=_as_dicts(request.messages),
        temperature=0.0,
        max_tokens=24,
        stop=list(request.stop),
        stream=True,
    )
    expected = "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks)
    print(f"{name}: {reply!r}")
    assert reply and reply == expected
