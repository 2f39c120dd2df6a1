"""Answer latency by stage (retrieve, rerank, generate), time to first token, prompt tokens.

Real path: XQuAD English and Arabic paragraphs ingested into two tenants, `use` embeddings,
hybrid retrieval, then `stream_answer` with the configured LLM (default: the local GGUF through
llama.cpp). One warm-up question is not counted: it loads the model and fills llama.cpp's prompt
cache with the fixed rules and examples, which every later prompt shares as a prefix.

    python -m bench.answer [--questions 20] [--provider llamacpp] [--max-passages 5]
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from app.config import Settings, load_settings
from app.generation.answer import AnswerDelta, AnswerDone, stream_answer
from app.services.answer import generation_limits
from app.services.container import Container
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


def answer_once(container: Container, tenant: str, question: str) -> dict[str, float]:
    """Stream one answer; returns stage ms, first-token ms, total ms and prompt tokens."""
    settings = container.settings
    timer = start_timer()
    retrieval = container.retriever.search(tenant, question, settings.top_k)
    first_token_ms = float("nan")
    prompt_tokens = float("nan")
    refused = 0.0
    for event in stream_answer(question, retrieval, container.llm, **generation_limits(settings)):
        if isinstance(event, AnswerDelta) and first_token_ms != first_token_ms:
            first_token_ms = timer.total_ms()
        if isinstance(event, AnswerDone):
            prompt_tokens = float(event.answer.prompt_tokens or "nan")
            refused = float(event.answer.refused)
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
    return row


def run(settings: Settings, count: int, seed: int) -> None:
    """Ingest, warm up, time `count` answers and print the table."""
    container = Container(settings)
    for task, tenant in (("xquad-en-en", "xquad-en"), ("xquad-ar-ar", "xquad-ar")):
        files = settings.data_dir / "bench-files" / tenant
        ingest_paragraphs(container, tenant, load_task(task).paragraphs, files)
    picked = questions_for(count + 1, seed)
    started = time.perf_counter()
    warm = answer_once(container, picked[0][0], picked[0][1].text)
    print(
        f"warm-up (model load + prompt cache): {time.perf_counter() - started:.1f} s, "
        f"first token at {warm['first_token'] / 1000:.1f} s"
    )
    rows = []
    for number, (tenant, question) in enumerate(picked[1:], start=1):
        rows.append(answer_once(container, tenant, question.text))
        print(f"{number}/{count}: {rows[-1]['total'] / 1000:.1f} s", end="\r", flush=True)
    print()
    metrics = (*STAGES, "first_token", "total", "prompt_tokens")
    body = [
        [name, median([r[name] for r in rows]), percentile([r[name] for r in rows], 95)]
        for name in metrics
    ]
    print(f"provider {container.llm.model_id}, {count} questions (en+ar), ms unless noted")
    print(table(["metric", "p50", "p95"], body))
    refusals = sum(r["refused"] for r in rows)
    print(f"refused: {refusals:.0f}/{count}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--provider", default=None, help="LLM provider (default: settings)")
    parser.add_argument("--max-passages", type=int, default=None)
    args = parser.parse_args()
    overrides: dict[str, object] = {}
    if args.provider:
        overrides["llm_provider"] = args.provider
    if args.max_passages:
        overrides["llm_max_passages"] = args.max_passages
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(data_dir=Path(data), env="development", **overrides)
        run(settings, args.questions, args.seed)


if __name__ == "__main__":
    main()
