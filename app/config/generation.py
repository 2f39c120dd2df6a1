"""The settings of the LLM and what it reads, answer concurrency, and conversations.

Mixed with the other concerns into the one `app.config.Settings`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel

from app.config.fields import setting

# The LLMs a deployment can name; app/providers/llms.py builds exactly these.
LLMProvider = Literal["llamacpp", "ollama", "openai", "extractive"]
LLM_PROVIDERS: frozenset[str] = frozenset(get_args(LLMProvider))


class GenerationSettings(BaseModel):
    """The LLM and what it reads, answer concurrency, and conversations."""

    llm_provider: LLMProvider = setting(
        "llamacpp",
        group="generation",
        description="llamacpp (in-process GGUF, default) | ollama | openai (any OpenAI-compatible "
        "server) | extractive (no LLM: best supporting sentences, cited).",
    )
    llm_model: str = setting(
        "", group="generation", description="Model name for ollama / openai (required there)."
    )
    llm_model_path: Path | None = setting(
        None,
        group="generation",
        description="A GGUF file for llamacpp; empty = Qwen2.5-Coder-1.5B-Instruct Q4_K_M "
        "assembled and verified.",
    )
    llm_max_tokens: int = setting(
        256, group="generation", unit="tokens", description="Longest answer.", gt=0
    )
    llm_context_tokens: int = setting(
        4096,
        group="generation",
        unit="tokens",
        description="The model's context; a question that does not fit with its passages is a "
        "422 `prompt_too_long`.",
        gt=0,
    )
    llm_threads: int = setting(
        2, group="generation", unit="threads", description="llama.cpp compute threads.", gt=0
    )
    llm_timeout_s: float = setting(
        120.0, group="generation", unit="s", description="Deadline of a whole answer.", gt=0
    )
    llm_prefix_cache: bool = setting(
        True,
        group="generation",
        description="llamacpp: evaluate the prompt's fixed rules and worked examples once per "
        "process and restore that state before every answer (nothing of an earlier answer is "
        "reused); false = llama.cpp's own reuse of whatever prefix the last prompt shared.",
    )
    llm_max_passages: int = setting(
        3, group="generation", unit="passages", description="Passages shown to the LLM.", gt=0
    )
    llm_passage_order: Literal["best_first", "best_last"] = setting(
        "best_last",
        group="generation",
        description="Order of the passages in the prompt: best_last puts the best-ranked one "
        "next to the question. The local model cites the passage it read last most often; "
        "with the abstain threshold 0.05 it cites a gold page in 0.45 of the natural manual "
        "questions against 0.28 best_first (docs/evaluation.md).",
    )
    llm_max_context_chars: int = setting(
        3000,
        group="generation",
        unit="characters",
        description="Passage characters in the prompt in all (prompt size is the latency lever).",
        gt=0,
    )
    llm_focus_chars: int = setting(
        700,
        group="generation",
        unit="characters",
        description="Passages are cut to the question's best sentences, this many characters in "
        "all; 0 shows whole passages (about twice the prompt to read before the first token).",
        ge=0,
    )
    llm_focus_rule: Literal["lead", "ranked"] = setting(
        "ranked",
        group="generation",
        description="How the focus budget is shared among the passages: ranked takes the best "
        "sentences of all passages first, so a lower-ranked passage may show only a few words; "
        "lead gives each passage its own best sentences within a share (two shares for the one "
        "holding the question's best sentence), so none does. With the local model lead cites a "
        "gold page no more often on the manuals (0.600 / 0.422 against 0.600 / 0.467, test / "
        "tuning half; docs/evaluation.md).",
    )
    models_dir: Path = setting(
        Path("models"),
        group="generation",
        description="Where model files are assembled or downloaded.",
    )
    refusal_text: str = setting(
        "I could not find the answer in the provided documents.",
        group="generation",
        description="The exact sentence the model must answer with when the passages do not "
        "contain the answer.",
    )
    llm_abstain_threshold: float = setting(
        0.05,
        group="generation",
        unit="probability",
        description="Local model only: refuse when its probability of starting the refusal "
        "sentence is at least this (1 = only when it actually refuses). Chosen with "
        "RAG_LLM_PASSAGE_ORDER=best_last on XQuAD, ARCD and the natural manual questions "
        "(`python -m eval.answers`, docs/evaluation.md): 0.05 refuses 7% of answerable manual "
        "questions where 0.02 refused 38%, at the cost of some refusals of unanswerable ones.",
        ge=0,
        le=1,
    )
    answer_log_days: int = setting(
        30,
        group="answers",
        unit="days",
        description="How long the answer record keeps each answer's question, cited and "
        "retrieved documents, timings and model (tenant admins export and delete it; feedback "
        "shows the question while it is kept). 0: no question is stored, only the ids that "
        "let a person rate their own answer.",
        ge=0,
        le=3650,
    )
    answer_max_concurrent: int = setting(
        1,
        group="answers",
        unit="answers",
        description="Answers generating at once, in total (the one local model: 1).",
        gt=0,
    )
    answer_max_per_tenant: int = setting(
        1,
        group="answers",
        unit="answers",
        description="Answers generating at once per tenant.",
        gt=0,
    )
    answer_max_per_user: int = setting(
        1, group="answers", unit="answers", description="Answers generating at once per user.", gt=0
    )
    answer_queue_size: int = setting(
        8,
        group="answers",
        unit="answers",
        description="Answers that may wait for a slot, in total.",
        ge=0,
    )
    answer_queue_per_tenant: int = setting(
        4,
        group="answers",
        unit="answers",
        description="Answers that may wait for a slot, per tenant.",
        ge=0,
    )
    answer_queue_max_wait_s: float = setting(
        30.0, group="answers", unit="s", description="Longest wait for a slot.", ge=0
    )
    stream_max_open: int = setting(
        32,
        group="answers",
        unit="streams",
        description="Open /query/stream responses in total; beyond them 429/503 at once.",
        gt=0,
    )
    stream_max_per_tenant: int = setting(
        8,
        group="answers",
        unit="streams",
        description="Open /query/stream responses per tenant.",
        gt=0,
    )
    stream_max_per_user: int = setting(
        4,
        group="answers",
        unit="streams",
        description="Open /query/stream responses per user.",
        gt=0,
    )
    conversation_max_turns: int = setting(
        20,
        group="conversations",
        unit="turns",
        description="Question/answer turns a conversation keeps (POST /conversations/{id}/"
        "messages); older ones are dropped.",
        gt=0,
    )
    conversation_context_turns: int = setting(
        3,
        group="conversations",
        unit="turns",
        description="Latest turns a follow-up is rewritten from.",
        gt=0,
    )
    conversation_rewrite: Literal["llm", "fallback"] = setting(
        "llm",
        group="conversations",
        description="llm (the answer model; the fallback, previous question + follow-up, when it "
        "fails, is too slow or says nothing usable) or fallback (never the LLM).",
    )
    conversation_rewrite_timeout_s: float = setting(
        20.0,
        group="conversations",
        unit="s",
        description="LLM rewrite budget before the fallback is used.",
        gt=0,
    )
