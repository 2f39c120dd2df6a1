"""What cutting passages to the question's best sentences keeps, per character budget.

For the answer evaluation's questions (same tasks, seed and sample as `eval.answers`, answerable
setting), retrieval runs once; then for each budget of `RAG_LLM_FOCUS_CHARS` (0 = whole passages,
the old prompt) it reports how often a gold answer span is still in the text the model reads, and
the tokens of the question's user message (passages, their tags and the question: what is read
before the first token, the rules and examples being restored). No model is run, only its
tokenizer, so a budget costs seconds; `eval.answers` then measures the chosen one end to end.

    python -m eval.focus_budget [--budgets 0 600 700 800 1000] [--questions 50]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

from app.config import load_settings
from app.container import Container
from app.generation.answer_limits import PassageLimits
from app.generation.prompt import hit_passage, user_message
from app.providers.gguf import ensure_default_model
from eval.answers import TASKS, contains_span, sample_questions
from eval.datasets import load_task
from eval.retrieval import CORPUS_OF_TASK, ingest_paragraphs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--budgets", type=int, nargs="+", default=[0, 600, 700, 800, 1000])
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    from llama_cpp import Llama

    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(_env_file=None, data_dir=Path(data), env="development")
        vocabulary = Llama(
            model_path=str(ensure_default_model(settings.models_dir)),
            vocab_only=True,
            verbose=False,
        )
        container = Container(settings)
        print("| task | focus chars | gold span kept | question tokens p50 | passages shown |")
        print("|---|---|---|---|---|")
        for name in TASKS:
            task = load_task(name)
            corpus = CORPUS_OF_TASK[name]
            ingest_paragraphs(container, corpus, task.paragraphs, Path(data) / corpus)
            questions = sample_questions(task, args.questions, args.seed)
            results = [
                container.retriever.search(corpus, q.text, settings.top_k) for q in questions
            ]
            for budget in args.budgets:
                kept, tokens, shown_counts = [], [], []
                for question, retrieval in zip(questions, results, strict=True):
                    limits = replace(PassageLimits.from_settings(settings), focus_chars=budget)
                    shown = limits.shown(question.text, retrieval.hits)
                    text = " ".join(hit.chunk.text for hit in shown)
                    kept.append(any(contains_span(text, gold) for gold in question.answers))
                    message = user_message(question.text, [hit_passage(hit) for hit in shown])
                    tokens.append(len(vocabulary.tokenize(message.encode(), add_bos=False)))
                    shown_counts.append(len(shown))
                print(
                    f"| {name} | {budget or 'whole'} | {statistics.fmean(kept):.2f} "
                    f"| {statistics.median(tokens):.0f} | {statistics.fmean(shown_counts):.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
