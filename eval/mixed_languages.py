"""One tenant holding English and Arabic documents: what the English arm (RAG_ENGLISH_EMBEDDING)
does to questions in either language about documents in either language.

XQuAD's held-out articles (outside the dev split) are halved: the English paragraphs of the
even-numbered articles and the Arabic paragraphs of the odd-numbered ones go into one tenant, so
every fact is there once, in one language. Questions (held-out, a seeded draw per set):
English about English documents (en-en), English about Arabic ones (en-ar: reached through the
first embedder's ranking of the chunks the English collection does not hold), Arabic about Arabic
(ar-ar) and Arabic about English (ar-en; never routed). Each is asked of the same stored vectors
with the English arm and without it (the first embedder alone), by the shipped hybrid and by the
dense arm alone; document-level nDCG@10 and hit@10.

    RAG_ENGLISH_EMBEDDING=minilm python -m eval.mixed_languages [--questions 150]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from app.config import load_settings
from app.container import Container
from app.retrieval.hybrid import HybridRetriever
from eval.datasets import Question, load_task, xquad_split
from eval.retrieval import RESULTS_DIR, git_commit, ingest_paragraphs, ranked_chunk_documents
from eval.retrieval_table import ndcg, ranks

SEED = 2026
SETS = {  # set -> (task, parity of the articles whose documents it asks about)
    "en-en": ("xquad-en-en", 0),
    "en-ar": ("xquad-en-ar", 1),
    "ar-ar": ("xquad-ar-ar", 1),
    "ar-en": ("xquad-ar-en", 0),
}


def _article(paragraph_id: str) -> int:
    return int(paragraph_id.split(":")[1])


def corpus_and_questions(limit: int) -> tuple[dict[str, str], dict[str, list[Question]]]:
    """The mixed tenant's paragraphs and each set's questions about them."""
    paragraphs: dict[str, str] = {}
    questions: dict[str, list[Question]] = {}
    rng = random.Random(SEED)
    for name, (task_name, parity) in SETS.items():
        task = load_task(task_name)
        _, held_out = xquad_split(task)
        mine = [q for q in held_out if _article(next(iter(q.gold))) % 2 == parity]
        for question in mine:
            for pid in question.gold:
                paragraphs[pid] = task.paragraphs[pid]
        picked = rng.sample(mine, limit) if limit < len(mine) else mine
        questions[name] = sorted(picked, key=lambda q: q.id)
    return paragraphs, questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=150, help="per set")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "mixed-languages.json")
    args = parser.parse_args()
    paragraphs, questions = corpus_and_questions(args.questions)
    report: dict[str, Any] = {"commit": git_commit(), "paragraphs": len(paragraphs), "sets": {}}
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(_env_file=None, data_dir=Path(data), env="development")
        if settings.english_embedding == "none":
            raise SystemExit("set RAG_ENGLISH_EMBEDDING (the arm measured against its absence)")
        container = Container(settings)
        started = time.perf_counter()
        doc_map = ingest_paragraphs(container, "mixed", paragraphs, Path(data) / "files")
        report["ingest_s"] = round(time.perf_counter() - started, 1)
        base = container.retriever
        first_arm = HybridRetriever(
            base.embedder, base.store, base.keyword_index, base.config, base.reranker
        )
        for name, asked in questions.items():
            row: dict[str, Any] = {"questions": len(asked)}
            for label, retriever in (("english-arm", base), ("first-arm", first_arm)):
                for mode in ("hybrid", "dense"):
                    doc_ranks = []
                    for question in asked:
                        docs = ranked_chunk_documents(
                            container, "mixed", question.text, mode, retriever
                        )
                        doc_ranks.append(ranks([doc_map.get(d, d) for d in docs], question.gold)[1])
                    row[f"{label} {mode}"] = {
                        "ndcg@10": sum(ndcg(r) for r in doc_ranks) / len(doc_ranks),
                        "hit@10": sum(1 for r in doc_ranks if r) / len(doc_ranks),
                        "ranks": doc_ranks,
                    }
            report["sets"][name] = row
            cells = ", ".join(
                f"{k} {v['ndcg@10']:.3f} / {v['hit@10']:.3f}"
                for k, v in row.items()
                if isinstance(v, dict)
            )
            print(f"{name} ({len(asked)}): {cells}", flush=True)
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(report) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
