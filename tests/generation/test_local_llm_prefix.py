"""The local model's saved prompt prefix: evaluated once, restored before every answer, and
nothing of an earlier request (another tenant's passages, another prompt, an abandoned stream)
is reused. At temperature 0 an answer after any history equals a freshly loaded model's."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from generation_builders import PARIS, POEMS, PassageSpec, relevant

from app.config import Settings, load_settings
from app.generation.grounded_answer import AnswerDelta, stream_answer
from app.generation.prompt import SHARED_MESSAGES, build_request
from app.providers.gguf import ensure_default_model
from app.providers.llms import LlamaCppLLM, _LocalModel
from app.providers.types import ChatMessage, ChatRequest, LLMDelta

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUESTION_A = "When was the Eiffel Tower completed?"
QUESTION_B = "من كتب قصيدة «قناع الفوضى»؟"


def _settings() -> Settings:
    return load_settings(_env_file=None, models_dir=ROOT / "models")


def _fresh_llm(settings: Settings, *, prefix_cache: bool = True) -> LlamaCppLLM:
    """A model of its own (not the process-wide shared one), so its context starts empty."""
    models_dir = settings.models_dir
    model = _LocalModel(lambda: ensure_default_model(models_dir), 4096, settings.llm_threads)
    return LlamaCppLLM(
        model, model_id="test", max_tokens=24, timeout_s=900, prefix_cache=prefix_cache
    )


def _request(question: str, passages: Sequence[PassageSpec], refusal: str) -> ChatRequest:
    return build_request(question, relevant(passages).hits, refusal)


def _reply(deltas: Iterator[LLMDelta]) -> tuple[str, str]:
    """(first delta, whole reply)."""
    texts = [delta.text for delta in deltas]
    return texts[0], "".join(texts)


@pytest.fixture(scope="module")
def refusal() -> str:
    return _settings().refusal_text


@pytest.fixture(scope="module")
def cold_b(refusal: str) -> tuple[str, str]:
    """Tenant B's reply from a freshly loaded model that has answered nothing else."""
    llm = _fresh_llm(_settings())
    return _reply(llm.stream(_request(QUESTION_B, POEMS, refusal)))


def test_answer_after_other_tenants_prompts_and_an_abandoned_stream_equals_a_cold_model(
    refusal: str, cold_b: tuple[str, str]
) -> None:
    llm = _fresh_llm(_settings())
    # Tenant A answers in full, then A's next stream is abandoned after its first delta.
    _reply(llm.stream(_request(QUESTION_A, PARIS, refusal)))
    abandoned = llm.stream(_request(QUESTION_A + " Answer in detail.", PARIS, refusal))
    next(abandoned)
    abandoned.close()  # type: ignore[attr-defined]
    # A prompt with another fixed part (a follow-up rewrite, say) takes the context over.
    rewrite = ChatRequest(
        messages=(
            ChatMessage("system", "Rewrite the follow-up question as a standalone question."),
            ChatMessage("user", "Paris tower? and when was it painted?"),
        ),
        shared_prefix=1,
    )
    _reply(llm.stream(rewrite))
    first, whole = _reply(llm.stream(_request(QUESTION_B, POEMS, refusal)))
    print(f"B cold {cold_b!r}, B after A {(first, whole)!r}")
    assert (first, whole) == cold_b
    # Again right after B itself: B's own passages are not reused either, the answer is the same.
    assert _reply(llm.stream(_request(QUESTION_B, POEMS, refusal))) == cold_b


def test_the_restored_context_holds_the_shared_messages_and_nothing_after_them(
    refusal: str,
) -> None:
    llm = _fresh_llm(_settings())
    request = _request(QUESTION_A, PARIS, refusal)
    _reply(llm.stream(request))  # evaluates and saves the prefix, then answers
    model = llm._model
    messages = [{"role": m.role, "content": m.content} for m in request.messages]
    prompt = model.render(messages)
    assert prompt is not None
    prefix = model.shared_prefix_tokens(messages, SHARED_MESSAGES, prompt)
    assert prefix is not None and 100 < len(prefix) < len(prompt.tokens)
    text = model.llama.detokenize(list(prefix), special=True).decode("utf-8")
    # The rules and both worked examples are in it; the question and its passages are not.
    assert refusal in text and "500 operating hours" in text
    assert QUESTION_A not in text and "Eiffel" not in text
    assert list(model._prefix_states) == [prefix]
    model.start_from_prefix(prefix)  # what every later answer starts from
    assert model.llama.n_tokens == len(prefix)
    assert list(model.llama.input_ids[: len(prefix)]) == list(prefix)


def test_streamed_answer_through_the_cache_is_cited(refusal: str) -> None:
    llm = _fresh_llm(_settings())
    events = list(stream_answer(QUESTION_A, relevant(PARIS), llm, refusal_text=refusal))
    text = "".join(e.text for e in events if isinstance(e, AnswerDelta))
    assert "1889" in text and "[1]" in text
