"""Follow-up questions rewritten into standalone ones, so retrieval sees what is asked.

"And when was it built?" retrieves nothing useful on its own. The LLM rewrites it from the
latest turns; when the LLM fails, is too slow or says something unusable, the fallback is the
previous question followed by the follow-up (deterministic, and measured in eval/followups.py).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from app.errors import RagError
from app.providers.types import LLM, ChatMessage, ChatRequest

log = logging.getLogger(__name__)

RewriteMethod = Literal["none", "llm", "fallback"]
# An answer shown to the rewriter is cut here: its gist names the subject, the rest is prompt cost.
ANSWER_CHARS = 300
# A rewrite is one question: this bounds what a model that rambles on one line can cost.
REWRITE_MAX_TOKENS = 160

_INSTRUCTIONS = (
    "Rewrite the user's last question so that it can be understood without the conversation: "
    "replace pronouns and vague references with what they refer to. Keep its meaning and "
    "language; do not answer it. Reply with the rewritten question only, on one line."
)
# One worked example: without it the small default model often answered the question instead.
_EXAMPLE = (
    "User: Who designed the Eiffel Tower?\n"
    "Assistant: The company of Gustave Eiffel [1].\n"
    "User's last question: When was it finished?",
    "When was the Eiffel Tower finished?",
)
# Words a follow-up uses to point back; a rewrite replaces them, so they need not survive it.
_POINTERS = frozenset(
    [
        "it",
        "its",
        "they",
        "them",
        "their",
        "this",
        "that",
        "these",
        "those",
        "there",
        "he",
        "him",
        "his",
        "she",
        "her",
        "who",
        "what",
        "when",
        "where",
        "which",
        "why",
        "how",
        "the",
        "and",
        "for",
        "was",
        "were",
        "did",
        "does",
        "with",
    ]
)
_WORD = re.compile(r"\w{3,}")


@dataclass(frozen=True)
class Turn:
    """One earlier question and the answer it got, with the documents that answer cites (None
    when they are not known: a chat client's own history)."""

    question: str
    answer: str
    cites: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Rewrite:
    """The question retrieval runs on, how it was made, and how long the LLM took (ms).

    `sources` are the documents whose text the question may quote: those the earlier answers
    an LLM rewrite read cite (None when not known); none for the fallback, which reads only the
    questions typed before.
    """

    question: str
    method: RewriteMethod
    llm_ms: float = 0.0
    sources: tuple[str, ...] | None = ()


def cited_by(history: Sequence[Turn]) -> tuple[str, ...] | None:
    """Every document the answers of `history` cite, sorted; None when one turn's are unknown."""
    cited: set[str] = set()
    for turn in history:
        if turn.cites is None:
            return None
        cited.update(turn.cites)
    return tuple(sorted(cited))


# A question shown is a str when the stored one is (a record with the question kept).
Shown = TypeVar("Shown", str, str | None)


def question_shown(
    question: Shown,
    typed: str | None,
    sources: Sequence[str] | None,
    readable: Callable[[str], bool],
) -> Shown:
    """What a viewer is shown of a question: a rewritten one (`typed` is what was asked) only
    when they read every document it may quote now, else the question as typed. Unknown
    `sources` (a chat client's history, a record from before they were kept) show the typed."""
    if question is None or typed is None or question == typed:
        return question
    if sources is not None and all(readable(document_id) for document_id in sources):
        return question
    return typed


def fallback_question(history: Sequence[Turn], follow_up: str, max_chars: int) -> str:
    """The previous question followed by the follow-up, cut to fit `max_chars` (the follow-up
    is kept whole; it is already within the limit)."""
    if not history:
        return follow_up
    room = max_chars - len(follow_up) - 1
    previous = " ".join(history[-1].question.split())[: max(room, 0)].strip()
    return f"{previous} {follow_up}" if previous else follow_up


def _transcript(history: Sequence[Turn], follow_up: str) -> str:
    lines = []
    for turn in history:
        answer = " ".join(turn.answer.split())
        if len(answer) > ANSWER_CHARS:
            answer = answer[:ANSWER_CHARS] + "…"
        lines.append(f"User: {' '.join(turn.question.split())}")
        lines.append(f"Assistant: {answer}")
    lines.append(f"User's last question: {follow_up}")
    return "\n".join(lines)


def ask_llm_to_rewrite(llm: LLM, history: Sequence[Turn], follow_up: str, timeout_s: float) -> str:
    """The LLM's first line for the rewrite prompt (the one LLM call of conversations), or ''
    when the reply only repeats a line of the prompt.

    Generation stops at the first line break after some text, past `timeout_s` (checked as text
    arrives), or at REWRITE_MAX_TOKENS; closing the stream stops the model. No stop string ends
    it at a line break: a reply that opens with one would then be empty.
    """
    transcript = _transcript(history, follow_up)
    request = ChatRequest(
        messages=(
            ChatMessage("system", _INSTRUCTIONS),
            ChatMessage("user", _EXAMPLE[0]),
            ChatMessage("assistant", _EXAMPLE[1]),
            ChatMessage("user", transcript),
        ),
        max_tokens=REWRITE_MAX_TOKENS,
        shared_prefix=3,  # the instructions and the example: no conversation's text
    )
    deadline = time.monotonic() + timeout_s
    text = ""
    deltas = llm.stream(request)
    try:
        for delta in deltas:
            text += delta.text
            if "\n" in text.lstrip() or len(text) > 2000:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("the rewrite took too long")
    finally:
        close = getattr(deltas, "close", None)
        if callable(close):
            close()
    first_line = text.strip().split("\n")[0].strip()
    # A provider without a model (`extractive`) answers a plain chat with its last user message:
    # the transcript's first line came back, which is no rewrite.
    if first_line in (line.strip() for line in transcript.split("\n")):
        return ""
    return first_line


_PREFIXES = ("rewritten question:", "standalone question:", "question:")


def usable_rewrite(
    raw: str, history: Sequence[Turn], follow_up: str, refusal_text: str, max_chars: int
) -> str | None:
    """The rewritten question, cleaned, or None when it cannot be trusted as one."""
    text = raw.strip().strip('"“”').strip()
    lowered = text.lower()
    for prefix in _PREFIXES:
        if lowered.startswith(prefix):
            text = text[len(prefix) :].strip().strip('"“”').strip()
            break
    if not text or refusal_text.strip() in text or len(text) > max_chars:
        return None
    # A rewrite much longer than everything it was made from is an answer, not a question.
    source_chars = len(follow_up) + sum(len(turn.question) for turn in history)
    if len(text) > 2 * source_chars + 40:
        return None
    if follow_up.rstrip().endswith("?") and not text.endswith("?"):
        return None  # a statement: the model answered
    # A rewrite keeps what the follow-up asks (one that lost most of its words answered it,
    # "24."), and its other words come from the conversation (not from the prompt's example).
    asked = _content_words(follow_up)
    written = _content_words(text)
    if asked and len(asked & written) * 2 < len(asked):
        return None
    known = asked.union(*(_content_words(f"{t.question} {t.answer}") for t in history))
    if len(written - known) > 1:
        return None
    return text


def _content_words(text: str) -> set[str]:
    return {word for word in _WORD.findall(text.lower()) if word not in _POINTERS}


def standalone_question(
    llm: LLM | None,
    history: Sequence[Turn],
    follow_up: str,
    *,
    refusal_text: str,
    max_chars: int,
    timeout_s: float,
) -> Rewrite:
    """The question to retrieve and answer with: the follow-up itself when there is no history,
    else the LLM's rewrite (when `llm` is given and its output is usable), else the fallback."""
    if not history:
        return Rewrite(follow_up, "none")
    if llm is not None:
        started = time.perf_counter()
        try:
            raw = ask_llm_to_rewrite(llm, history, follow_up, timeout_s)
        except (RagError, TimeoutError) as exc:
            log.warning("follow-up rewrite failed; using the fallback", extra={"error": str(exc)})
            raw = ""
        elapsed = (time.perf_counter() - started) * 1000.0
        rewritten = usable_rewrite(raw, history, follow_up, refusal_text, max_chars)
        if rewritten is not None:
            return Rewrite(rewritten, "llm", elapsed, cited_by(history))
        return Rewrite(fallback_question(history, follow_up, max_chars), "fallback", elapsed)
    return Rewrite(fallback_question(history, follow_up, max_chars), "fallback")
