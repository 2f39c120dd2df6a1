"""Follow-up rewriting: the LLM's rewrite when usable, the measured fallback otherwise."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from app.errors import InvalidInput, ProviderUnavailable
from app.providers.extractive import ExtractiveLLM
from app.providers.types import LLM, ChatRequest, LLMDelta
from app.services.blocks.followups import (
    Rewrite,
    Turn,
    fallback_question,
    question_shown,
    standalone_question,
)
from app.services.chat_completions import Said, split_chat
from tests.fakes import FakeLLM

REFUSAL = "I could not find the answer in the provided documents."
HISTORY = [Turn("Who designed the Harrowgate castle?", "The stonemason guild designed it [1].")]


def _rewrite(llm: LLM, follow_up: str = "When was it built?", **extra: float) -> Rewrite:
    return standalone_question(
        llm,
        HISTORY,
        follow_up,
        refusal_text=REFUSAL,
        max_chars=2000,
        timeout_s=extra.get("timeout_s", 10.0),
    )


def test_a_first_question_is_asked_as_it_is_without_the_llm() -> None:
    llm = FakeLLM("should not be asked")
    rewrite = standalone_question(
        llm, [], "When was it built?", refusal_text=REFUSAL, max_chars=2000, timeout_s=10.0
    )
    assert (rewrite.question, rewrite.method) == ("When was it built?", "none")
    assert llm.requests == []


def test_the_llm_rewrite_is_used_and_sees_the_history() -> None:
    llm = FakeLLM("When was the Harrowgate castle built?\nExtra line the model added.")
    rewrite = _rewrite(llm)
    assert rewrite.question == "When was the Harrowgate castle built?"
    assert rewrite.method == "llm"
    prompt = llm.requests[0].messages[-1].content
    assert "Harrowgate castle" in prompt and "When was it built?" in prompt


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "   ",
        REFUSAL,
        "The castle was built in 1342 by the guild. " * 20,
        "1342.",
        "Yes?",
        "When was the Harrowgate castle built.",
        "When was the Eiffel Tower built?",
    ],
    ids=[
        "empty",
        "blank",
        "refusal",
        "a-long-answer",
        "a-short-answer",
        "another-question",
        "a-statement",
        "a-subject-from-elsewhere",
    ],
)
def test_unusable_output_falls_back_to_previous_question_plus_follow_up(reply: str) -> None:
    rewrite = _rewrite(FakeLLM(reply))
    assert rewrite.method == "fallback"
    assert rewrite.question == "Who designed the Harrowgate castle? When was it built?"


class _DownLLM:
    model_id = "down"

    def stream(self, request: ChatRequest) -> Iterator[LLMDelta]:
        raise ProviderUnavailable("connection refused")


def test_the_extractive_provider_which_echoes_the_prompt_falls_back() -> None:
    # Without a model, a plain chat gets its last user message back: the transcript.
    rewrite = _rewrite(ExtractiveLLM(), "Who built the Harrowgate castle?")
    assert rewrite.method == "fallback"
    assert rewrite.question == (
        "Who designed the Harrowgate castle? Who built the Harrowgate castle?"
    )


def test_the_rewrite_is_one_short_plain_chat_call() -> None:
    llm = FakeLLM("When was the Harrowgate castle built?")
    _rewrite(llm)
    [request] = llm.requests
    assert request.grounding is None and request.max_tokens is not None
    assert request.messages[0].role == "system" and request.messages[-1].role == "user"


def test_an_unavailable_llm_falls_back() -> None:
    rewrite = _rewrite(_DownLLM())
    assert rewrite.method == "fallback"


def test_a_too_slow_llm_is_stopped_and_falls_back() -> None:
    llm = FakeLLM("When was the Harrowgate castle built?", piece_chars=1)
    rewrite = _rewrite(llm, timeout_s=1e-9)
    assert rewrite.method == "fallback"
    assert llm.pieces_streamed < len("When was the Harrowgate castle built?")  # stopped early


def test_the_fallback_keeps_the_follow_up_whole_within_the_limit() -> None:
    history = [Turn("x" * 100, "")]
    question = fallback_question(history, "and in 2022?", max_chars=50)
    assert question.endswith(" and in 2022?") and len(question) <= 50


def test_chat_messages_split_into_turns_and_the_last_question() -> None:
    chat = split_chat(
        [
            Said("system", "be nice"),
            Said("user", "Who designed it?"),
            Said("assistant", "The guild [1]."),
            Said("user", "When?"),
        ]
    )
    assert chat.history == [Turn("Who designed it?", "The guild [1].")]
    assert chat.question == "When?"


@pytest.mark.parametrize(
    "messages",
    [[], [Said("user", "Who?"), Said("assistant", "The guild.")], [Said("system", "hi")]],
    ids=["none", "ends-with-answer", "only-system"],
)
def test_a_chat_without_a_last_user_question_is_refused(messages: list[Said]) -> None:
    with pytest.raises(InvalidInput):
        split_chat(messages)


def _asked(history: list[Turn], llm: LLM | None) -> Rewrite:
    return standalone_question(
        llm, history, "When was it built?", refusal_text=REFUSAL, max_chars=2000, timeout_s=10.0
    )


def test_a_rewrite_shows_only_to_who_reads_every_document_it_may_quote() -> None:
    history = [Turn("Who designed the castle?", "The stonemason guild [1][2].", ("doc-a", "doc-b"))]
    rewrite = _asked(history, FakeLLM("When was the castle of the stonemason guild built?"))
    assert (rewrite.method, rewrite.sources) == ("llm", ("doc-a", "doc-b"))
    typed = "When was it built?"

    def reads(*documents: str) -> Callable[[str], bool]:
        return set(documents).__contains__

    assert question_shown(rewrite.question, typed, rewrite.sources, reads("doc-a", "doc-b")) == (
        rewrite.question
    )
    assert question_shown(rewrite.question, typed, rewrite.sources, reads("doc-a")) == typed
    # Sources not known (a chat client's history, a record from before): always as typed.
    chat = _asked(
        [Turn("Who designed the castle?", "The stonemason guild [1].")],
        FakeLLM("When was the castle of the stonemason guild built?"),
    )
    assert chat.sources is None
    assert question_shown(chat.question, typed, chat.sources, reads("doc-a", "doc-b")) == typed
    # The fallback reads only typed questions: it quotes no document.
    fallback = _asked(history, None)
    assert (fallback.method, fallback.sources) == ("fallback", ())
    assert question_shown(fallback.question, typed, fallback.sources, reads()) == fallback.question
