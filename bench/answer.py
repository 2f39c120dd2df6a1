"""Answer latency by stage (retrieve, rerank, generate), time to first token, prompt tokens.

Real path: XQuAD English and Arabic paragraphs ingested into two tenants, `use` embeddings,
hybrid retrieval, then `stream_answer` with the configured LLM (default: the local GGUF through
llama.cpp). One warm-up question is not counted: it loads the model and evaluates the fixed
rules and examples once.

Two paths answer the same questions in one run, one after the other per question: `new`, the
configured settings (by default the fixed prefix's saved state is restored before every answer,
RAG_LLM_PREFIX_CACHE, and the passages are cut to the question's best sentences,
RAG_LLM_FOCUS_CHARS), and `old`, the answer path before both: prefix cache off (llama.cpp reuses
whatever prefix the previous prompt shared) and whole passages. `old` runs first on each
question, so it follows `new` on a different question, as it followed the previous question
before; `new` restores its state and gains nothing from following `old` on the same question.

    python -m bench.answer [--questions 20] [--paths old new] [--provider llamacpp]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from app.config import Settings, load_settings
from app.container import Container
from app.generation.answer_limits import GenerationLimits
from app.generation.grounded_answer import AnswerDelta, AnswerDone
from app.providers.llms import build_llm
from app.providers.types import LLM
from app.services.blocks.followups import Turn, ask_llm_to_rewrite
from app.timing import start_timer
from bench.common import median, percentile, table
from eval.datasets import Question, load_task
from eval.retrieval import ingest_paragraphs

STAGES = ("retrieve", "rerank", "generate")
RETRIEVAL_STAGES = ("embed_query", "dense", "keyword", "fuse")


def questions_for(count: int, seed: int) -> list[tuple[str, Question]]:
    """Half English, half Arabic questions (tenant, question), fixed seed."""
    rng = random.Random(seed)
    english = load_task("xquad-en-en").questions
    arabic = load_task("xquad-ar-ar").questions
    picked = [("xquad-en", q) for q in rng.sample(english, count - count // 2)]
    picked += [("xquad-ar", q) for q in rng.sample(arabic, count // 2)]
    return picked


@dataclass(frozen=True)
class AnswerPath:
    """One way of answering: its settings and the LLM built from them."""

    settings: Settings
    llm: LLM


def answer_once(
    container: Container, path: AnswerPath, tenant: str, question: str
) -> tuple[dict[str, float], str]:
    """Stream one answer; returns (stage ms, first-token ms, total ms, prompt tokens), text."""
    settings = path.settings
    timer = start_timer()
    retrieval = container.retriever.search(tenant, question, settings.top_k)
    first_token_ms = float("nan")
    prompt_tokens = float("nan")
    refused = 0.0
    text = ""
    limits = GenerationLimits.from_settings(settings)
    for event in limits.stream(question, retrieval, path.llm, container.embedder):
        if isinstance(event, AnswerDelta) and first_token_ms != first_token_ms:
            first_token_ms = timer.total_ms()
        if isinstance(event, AnswerDone):
            prompt_tokens = float(event.answer.prompt_tokens or "nan")
            refused = float(event.answer.refused)
            text = event.answer.text
    stages = timer.stages
    row = {
        "retrieve": sum(ms for name, ms in stages.items() if name in RETRIEVAL_STAGES),
        "rerank": stages.get("rerank", 0.0),
        "generate": stages.get("generate", 0.0),
    }
    row.update(
        first_token=first_token_ms,
        total=timer.total_ms(),
        prompt_tokens=prompt_tokens,
        refused=refused,
    )
    return row, text


def rewrite_once(llm: LLM, question: str) -> float:
    """A conversation's follow-up rewrite before the answer (another prompt in between): ms."""
    started = time.perf_counter()
    ask_llm_to_rewrite(llm, [Turn(question, "It is in the passage.")], "And when?", 900.0)
    return (time.perf_counter() - started) * 1000


def answer_paths(settings: Settings, names: list[str]) -> dict[str, AnswerPath]:
    """Each path: `new` as configured; `old` with the prefix cache off and whole passages
    (the model file is loaded once and shared)."""
    old = settings.model_copy(update={"llm_prefix_cache": False, "llm_focus_chars": 0})
    built = {
        "old": AnswerPath(old, build_llm(old)),
        "new": AnswerPath(settings, build_llm(settings)),
    }
    return {name: built[name] for name in names}


def summary(rows: list[dict[str, float]]) -> list[list[object]]:
    """p50 and p95 of every metric over the rows."""
    metrics = (*STAGES, "first_token", "total", "prompt_tokens", "rewrite")
    measured = {name: [r[name] for r in rows if not math.isnan(r[name])] for name in metrics}
    # (an answer the relevance gate refused has no prompt; NaN would scramble the sort)
    return [[name, median(measured[name]), percentile(measured[name], 95)] for name in metrics]


def run(
    settings: Settings, count: int, seed: int, paths: list[str], after_rewrite: bool = False
) -> None:
    """Ingest, warm up, time `count` answers per path and print a table per path; with
    `after_rewrite`, each answer follows a follow-up rewrite prompt, as in a conversation."""
    container = Container(settings)
    answering = answer_paths(settings, paths)
    for task, tenant in (("xquad-en-en", "xquad-en"), ("xquad-ar-ar", "xquad-ar")):
        files = settings.data_dir / "bench-files" / tenant
        ingest_paragraphs(container, tenant, load_task(task).paragraphs, files)
    picked = questions_for(count + 1, seed)
    for path, way in answering.items():
        started = time.perf_counter()
        warm, _ = answer_once(container, way, picked[0][0], picked[0][1].text)
        print(
            f"{path} warm-up (model load + prefix): {time.perf_counter() - started:.1f} s, "
            f"first token at {warm['first_token'] / 1000:.1f} s"
        )
    rows: dict[str, list[dict[str, float]]] = {path: [] for path in answering}
    texts: dict[str, list[str]] = {path: [] for path in answering}
    for number, (tenant, question) in enumerate(picked[1:], start=1):
        for path, way in answering.items():
            rewrite_ms = rewrite_once(way.llm, question.text) if after_rewrite else float("nan")
            row, text = answer_once(container, way, tenant, question.text)
            row["rewrite"] = rewrite_ms
            rows[path].append(row)
            texts[path].append(text)
            print(
                f"{number}/{count} {path}: first token {row['first_token']:.0f} ms, "
                f"total {row['total']:.0f} ms, {row['prompt_tokens']:.0f} prompt tokens",
                flush=True,
            )
    for path, way in answering.items():
        print(
            f"path {path}: provider {way.llm.model_id}, {count} questions (en+ar), ms unless noted"
        )
        print(table(["metric", "p50", "p95"], summary(rows[path])))
        refusals = sum(r["refused"] for r in rows[path])
        print(f"refused: {refusals:.0f}/{count}")
    if len(answering) == 2:
        same = sum(a == b for a, b in zip(texts["old"], texts["new"], strict=True))
        print(f"identical answer text, old vs new: {same}/{count}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--provider", default=None, help="LLM provider (default: settings)")
    parser.add_argument("--max-passages", type=int, default=None)
    parser.add_argument(
        "--paths",
        nargs="+",
        choices=("old", "new"),
        default=["old", "new"],
        help="old: prefix cache off, whole passages; new: as configured (default: both, "
        "same questions)",
    )
    parser.add_argument(
        "--after-rewrite",
        action="store_true",
        help="before each answer, a conversation's follow-up rewrite prompt (another prompt)",
    )
    args = parser.parse_args()
    overrides: dict[str, object] = {}
    if args.provider:
        overrides["llm_provider"] = args.provider
    if args.max_passages:
        overrides["llm_max_passages"] = args.max_passages
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(data_dir=Path(data), env="development", **overrides)
        run(settings, args.questions, args.seed, args.paths, args.after_rewrite)


if __name__ == "__main__":
    main()
