"""The local model's prompt preparation per answer: the chat template rendered once (`new`)
against the earlier path (`old`), which rendered the whole prompt twice (for its token count
and for its shared prefix) and then let llama-cpp-python render and tokenize it a third time.

Real prompts: `build_request` over the 5 XQuAD paragraphs that follow each sampled question's
gold paragraph (half English, half Arabic), the shipped GGUF's template and tokenizer.
llama-cpp-python's own render is timed by running `create_chat_completion` up to the point
where it hands its tokens to `create_completion`; nothing is decoded.

    python -m bench.prompt_render [--prompts 20]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.config import load_settings
from app.domain import Chunk, SearchHit
from app.generation.prompt import SHARED_MESSAGES, build_request
from app.providers.gguf import ensure_default_model
from app.providers.llms import _as_dicts, _common_start, _LocalModel
from bench.common import median, percentile, table
from eval.datasets import load_task


class _Fed(Exception):
    """Stops llama-cpp-python's chat completion where decoding would start."""


def _hits(paragraphs: list[str]) -> list[SearchHit]:
    return [
        SearchHit(
            chunk=Chunk(f"c{i}", "t", f"d{i}", f"doc{i}.pdf", 1, "1", 0, 0, len(text), text),
            score=1.0 / (i + 1),
        )
        for i, text in enumerate(paragraphs)
    ]


def prompts(count: int, seed: int) -> list[list[dict[str, str]]]:
    """Answer prompts of 5 passages each, half English, half Arabic, fixed seed."""
    rng = random.Random(seed)
    refusal = load_settings(_env_file=None).refusal_text
    found = []
    for task_name, share in (("xquad-en-en", count - count // 2), ("xquad-ar-ar", count // 2)):
        task = load_task(task_name)
        texts = list(task.paragraphs.values())
        for question in rng.sample(task.questions, share):
            start = list(task.paragraphs).index(sorted(question.gold)[0])
            request = build_request(question.text, _hits(texts[start : start + 5]), refusal)
            found.append(_as_dicts(request.messages))
    return found


def old_preparation(model: _LocalModel, messages: list[dict[str, str]], shared: int) -> None:
    """The earlier `_generate` before decoding: three renders of the whole prompt."""
    formatter, llama = model.formatter, model.llama
    tokens = model._tokens(formatter(messages=messages).prompt)  # prompt_tokens
    whole = formatter(messages=messages).prompt  # shared_prefix_tokens
    alone = formatter(messages=messages[:shared]).prompt
    prefix = model._tokens(_common_start(whole, alone))
    assert tokens[: len(prefix)] == prefix
    with contextlib.suppress(_Fed):  # create_chat_completion renders and tokenizes it again
        llama.create_chat_completion(messages=messages, stream=True)


def new_preparation(model: _LocalModel, messages: list[dict[str, str]], shared: int) -> None:
    """`_generate` now: one render, one tokenization, fed to `create_completion` as tokens."""
    prompt = model.render(messages)
    assert prompt is not None
    assert model.shared_prefix_tokens(messages, shared, prompt) is not None


def timed(repeats: int, step: Callable[..., Any], *args: Any, **kwargs: Any) -> list[float]:
    """Milliseconds of each of `repeats` calls of `step(*args, **kwargs)`."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        step(*args, **kwargs)
        times.append((time.perf_counter() - started) * 1000.0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    settings = load_settings(_env_file=None, models_dir=Path("models"))
    model = _LocalModel(
        lambda: ensure_default_model(settings.models_dir), 4096, settings.llm_threads
    )
    model.loaded()

    def fed(**kwargs: Any) -> None:
        raise _Fed

    model.llama.create_completion = fed
    shared = SHARED_MESSAGES
    samples = prompts(args.prompts, args.seed)
    results: dict[str, list[float]] = {"old": [], "new": [], "one render": [], "tokenize": []}
    tokens = []
    for messages in samples:
        for name, prepare in (("old", old_preparation), ("new", new_preparation)):
            results[name] += timed(args.repeats, prepare, model, messages, shared)
        results["one render"] += timed(args.repeats, model.formatter, messages=messages)
        text = model.formatter(messages=messages).prompt
        results["tokenize"] += timed(args.repeats, model._tokens, text)
        tokens.append(len(model._tokens(text)))
    rows: list[list[object]] = [
        [name, median(times), percentile(times, 95)] for name, times in results.items()
    ]
    saving = [old - new for old, new in zip(results["old"], results["new"], strict=True)]
    rows.append(["saving (old - new)", median(saving), percentile(saving, 95)])
    print(
        f"{len(samples)} answer prompts, {args.repeats} runs each, "
        f"prompt tokens median {median(tokens):.0f}"
    )
    print(table(["preparation per answer", "median ms", "p95 ms"], rows))
    print(f"new / old (medians): {median(results['new']) / median(results['old']):.2f}")


if __name__ == "__main__":
    main()
