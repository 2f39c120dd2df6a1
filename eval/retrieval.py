"""Retrieval evaluation on real data through the real pipeline: dense, keyword, hybrid, rerank.

Every paragraph is written to a file and ingested through the service's ingestion pipeline into
its corpus's own tenant (XQuAD English, XQuAD Arabic, ARCD test); questions are then asked through
the retriever in each mode and scored by document. Our own small set (eval/custom_set.py) covers
SKUs, page citations in multi-page PDFs, and questions no document answers. The natural
questions on real manuals (eval/manual_questions.py) are scored by page, per split.

    python -m eval.retrieval [--provider use] [--tasks ...] [--modes ...] [--limit N]
    python -m eval.retrieval --manuals-only [--provider use]

Prints a table and writes eval/results/retrieval-<provider>.json (with --manuals-only:
retrieval-manuals-<provider>.json) with configuration, models, git commit and date.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from app.config import Settings, load_settings
from app.container import Container
from app.domain import document_id
from app.providers.embeddings import use_embedder
from app.providers.types import Embedder
from app.retrieval.hybrid import (
    RETRIEVAL_MODES,
    HybridRetriever,
    Recall,
    RetrieverConfig,
    fuse,
)
from eval.contents_case import evaluate_contents_case
from eval.custom_set import CustomCase, build_custom_set
from eval.datasets import TASKS, Question, RetrievalTask, load_task, xquad_split
from eval.manual_questions import evaluate_manual_questions
from eval.metrics import summarize
from testkit.indexing import index_file

CHECKOUT = Path(__file__).resolve().parents[1]
RESULTS_DIR = CHECKOUT / "eval" / "results"
# Both XQuAD tasks over English paragraphs share one tenant; each corpus is ingested once.
CORPUS_OF_TASK = {
    "xquad-en-en": "xquad-en",
    "xquad-ar-en": "xquad-en",
    "xquad-ar-ar": "xquad-ar",
    "xquad-en-ar": "xquad-ar",
    "arcd-test": "arcd",
    "arcd-train": "arcd-train",
}
# "Haystack plain RRF" (the baseline every fusion change is measured against), computed with our
# own fusion over our own arms:
# both arms weighted 1, k=60, no coverage scaling, no exact-match pinning, and the model's own
# question vectors (Haystack does not centre them: `baseline_embedder`).
PLAIN_RRF = "plain-rrf"
PLAIN_RRF_CONFIG = RetrieverConfig(
    rrf_k=60, dense_weight=1.0, keyword_weight=1.0, keyword_coverage_power=0.0
)
# The dense arm with the model's own question vectors (what the service's dense arm was before
# the USE question centring; the dense arm of the Haystack baseline).
UNCENTRED_DENSE = "dense-uncentred"
BASELINES = (PLAIN_RRF, UNCENTRED_DENSE)
EVAL_MODES = (*RETRIEVAL_MODES, *BASELINES)


@dataclass
class ModeResult:
    """Metrics of one task in one retrieval mode."""

    metrics: dict[str, float]
    ms_per_query: float
    extra: dict[str, float] = field(default_factory=dict)


def git_commit() -> str:
    """The commit the evaluated code is at (with -dirty when the tree has changes)."""
    try:
        commit = subprocess.run(
            ["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit


def portable_model_id(model_id: str) -> str:
    """A model id fit for a committed results file: a local model folder is named from the
    installed package (or the checkout) it is in, never by this machine's absolute path."""
    provider, separator, where = model_id.partition(":")
    if not separator or not where.startswith("/"):
        return model_id
    path = Path(where)
    for anchor in ("site-packages", "dist-packages"):
        if anchor in path.parts:
            return f"{provider}:{Path(*path.parts[path.parts.index(anchor) + 1 :])}"
    if path.is_relative_to(CHECKOUT):
        return f"{provider}:{path.relative_to(CHECKOUT)}"
    return f"{provider}:{Path(*path.parts[-2:])}"


def ingest_paragraphs(
    container: Container, tenant: str, paragraphs: dict[str, str], folder: Path
) -> dict[str, str]:
    """Ingest each paragraph as its own document; returns document id -> paragraph id."""
    folder.mkdir(parents=True, exist_ok=True)
    doc_to_paragraph: dict[str, str] = {}
    for pid, text in paragraphs.items():
        source = pid.replace(":", "_") + ".txt"
        path = folder / source
        path.write_text(text, encoding="utf-8")
        index_file(
            path,
            tenant_id=tenant,
            source=source,
            embedder=container.embedder,
            corpus=container.corpus,
            config=container.pipeline_config,
        )
        doc_to_paragraph[document_id(tenant, source)] = pid
    return doc_to_paragraph


_DOCUMENT_OF_CHUNK: dict[str, dict[str, str]] = {}


def _document_of_chunk(container: Container, tenant: str) -> dict[str, str]:
    """chunk id -> document id for a tenant (read once; the eval corpora do not change)."""
    if tenant not in _DOCUMENT_OF_CHUNK:
        _DOCUMENT_OF_CHUNK[tenant] = {
            c.id: c.document_id for c in container.corpus.iter_chunks(tenant)
        }
    return _DOCUMENT_OF_CHUNK[tenant]


def question_embedding(settings: Settings) -> str:
    """How the embedder treats questions (for the results JSON)."""
    if settings.embedding_provider != "use" or not settings.use_question_centring:
        return "the model's own question vectors"
    from app.providers.use_question_mean import QUESTION_MEAN_SCALE

    return f"minus {QUESTION_MEAN_SCALE} x the mean question (app/providers/use_question_mean.py)"


@cache
def baseline_embedder(container: Container) -> Embedder:
    """The configured model as Haystack would run it: for `use`, its own question vectors (the
    service subtracts the mean question, app/providers/use_question_mean.py); same passages."""
    settings = container.settings
    if settings.embedding_provider != "use":
        return container.embedder
    return use_embedder(settings.embedding_threads, settings.embedding_batch_size, False)


def baseline_recall(container: Container, tenant: str, query: str, ours: Recall) -> Recall:
    """The arms as the Haystack baseline has them: our keyword arm (from `ours`), and the dense
    arm searched with the baseline embedder's question vector (same stored passage vectors)."""
    recall = Recall(keyword_ids=list(ours.keyword_ids), coverage=ours.coverage)
    vector = baseline_embedder(container).embed_query(query)
    hits = container.corpus.query(
        tenant_id=tenant, vector=vector, k=container.retriever.config.dense_candidates
    )
    recall.dense_ids = [chunk.id for chunk, _ in hits]
    for chunk_id in recall.dense_ids + recall.keyword_ids:
        recall.candidate(chunk_id)
    return recall


def ranked_chunk_documents(
    container: Container,
    tenant: str,
    query: str,
    mode: str,
    retriever: HybridRetriever | None = None,
) -> list[str]:
    """The document id of each of the top 30 chunks, in rank order (a document repeats once per
    chunk of it); `retriever` replaces the container's for the modes the service has."""
    if mode in BASELINES:
        ours = container.retriever.recall(tenant, query, "hybrid")
        recall = baseline_recall(container, tenant, query, ours)
        doc_of = _document_of_chunk(container, tenant)
        fused = fuse(recall, "hybrid" if mode == PLAIN_RRF else "dense", PLAIN_RRF_CONFIG)
        return [doc_of[cid] for cid in fused][:30]
    searcher = retriever or container.retriever
    result = searcher.search(tenant, query, 30, mode)  # type: ignore[arg-type]
    return [hit.chunk.document_id for hit in result.hits]


def ranked_documents(container: Container, tenant: str, query: str, mode: str) -> list[str]:
    """Document ids in rank order (first chunk of each document counts), top 10."""
    return list(dict.fromkeys(ranked_chunk_documents(container, tenant, query, mode)))[:10]


def evaluate_task(
    container: Container,
    task: RetrievalTask,
    tenant: str,
    doc_map: dict[str, str],
    modes: list[str],
    held_out: list[Question] | None = None,
) -> tuple[dict[str, ModeResult], dict[str, ModeResult]]:
    """Metrics per mode for every question of the task, and for the `held_out` subset (the
    questions tuning never saw; all of them when None)."""
    out: dict[str, ModeResult] = {}
    out_held: dict[str, ModeResult] = {}
    held_ids = {q.id for q in (held_out if held_out is not None else task.questions)}
    for mode in modes:
        rankings, timings = [], []
        for question in task.questions:
            started = time.perf_counter()
            docs = ranked_documents(container, tenant, question.text, mode)
            timings.append((time.perf_counter() - started) * 1000)
            rankings.append([doc_map.get(d, d) for d in docs])
        metrics = summarize(rankings, [q.gold for q in task.questions])
        out[mode] = ModeResult(metrics, statistics.fmean(timings))
        kept = [i for i, q in enumerate(task.questions) if q.id in held_ids]
        held_metrics = summarize(
            [rankings[i] for i in kept], [task.questions[i].gold for i in kept]
        )
        out_held[mode] = ModeResult(held_metrics, statistics.fmean(timings[i] for i in kept))
    return out, out_held


def evaluate_custom(
    container: Container, cases: list[CustomCase], tenant: str, modes: list[str]
) -> dict[str, ModeResult]:
    """Our own set: document hit, cited page, and refusal of unanswerable questions."""
    out: dict[str, ModeResult] = {}
    modes = [m for m in modes if m not in BASELINES]
    answerable = [c for c in cases if c.gold_source is not None]
    unanswerable = [c for c in cases if c.gold_source is None]
    for mode in modes:
        rankings: list[list[str]] = []
        golds: list[set[str]] = []
        page_ok: list[float] = []
        gated: list[float] = []
        timings: list[float] = []
        for case in answerable:
            assert case.gold_source is not None
            started = time.perf_counter()
            result = container.retriever.search(tenant, case.question, 10, mode)  # type: ignore[arg-type]
            timings.append((time.perf_counter() - started) * 1000)
            sources = list(dict.fromkeys(h.chunk.source for h in result.hits))
            rankings.append(sources)
            golds.append({case.gold_source})
            top = result.hits[0] if result.hits else None
            page_ok.append(
                float(
                    top is not None
                    and top.chunk.source == case.gold_source
                    and (case.gold_page is None or top.chunk.page_label == case.gold_page)
                )
            )
        for case in unanswerable:
            result = container.retriever.search(tenant, case.question, 10, mode)  # type: ignore[arg-type]
            gated.append(float(not result.relevant))
        metrics = summarize(rankings, golds)
        extra = {
            "top1_page_correct": statistics.fmean(page_ok),
            "unanswerable_refused": statistics.fmean(gated) if gated else float("nan"),
        }
        out[mode] = ModeResult(metrics, statistics.fmean(timings), extra)
    return out


def available_modes(container: Container, requested: list[str]) -> list[str]:
    """The requested modes, without `rerank` when no reranker is configured."""
    return [m for m in requested if m != "rerank" or container.reranker is not None]


def held_out_questions(task: RetrievalTask) -> list[Question] | None:
    """The questions fusion tuning never saw: the XQuAD remainder; all of ARCD test."""
    if task.name.startswith("xquad-"):
        return xquad_split(task)[1]
    return None


def print_table(results: dict[str, dict[str, ModeResult]]) -> None:
    """A markdown table: one row per task and mode."""
    print("| task | mode | nDCG@10 | hit@1 | hit@5 | MRR | ms/query | extra |")
    print("|---|---|---|---|---|---|---|---|")
    for task, modes in results.items():
        for mode, r in modes.items():
            m = r.metrics
            extra = ", ".join(f"{k}={v:.3f}" for k, v in r.extra.items())
            print(
                f"| {task} | {mode} | {m['ndcg@10']:.3f} | {m['hit@1']:.3f} | {m['hit@5']:.3f} "
                f"| {m['mrr']:.3f} | {r.ms_per_query:.1f} | {extra} |"
            )


def run(
    settings: Settings, tasks: list[str], modes: list[str], limit: int | None
) -> dict[str, Any]:
    """Ingest, evaluate and return the full report."""
    container = Container(settings)
    modes = available_modes(container, modes)
    results: dict[str, dict[str, ModeResult]] = {}
    held: dict[str, dict[str, ModeResult]] = {}
    ingest_s: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        corpora: dict[str, dict[str, str]] = {}
        for name in tasks:
            task = load_task(name)
            held_out = held_out_questions(task)
            if limit:
                task.questions[:] = task.questions[:limit]
            tenant = CORPUS_OF_TASK[name]
            if tenant not in corpora:
                started = time.perf_counter()
                corpora[tenant] = ingest_paragraphs(
                    container, tenant, task.paragraphs, Path(tmp) / tenant
                )
                ingest_s[tenant] = time.perf_counter() - started
            results[name], held[name] = evaluate_task(
                container, task, tenant, corpora[tenant], modes, held_out
            )
        cases, files = build_custom_set(Path(tmp) / "custom")
        for path in files:
            index_file(
                path,
                tenant_id="custom",
                source=path.name,
                embedder=container.embedder,
                corpus=container.corpus,
                config=container.pipeline_config,
            )
        results["custom"] = evaluate_custom(container, cases, "custom", modes)
        contents = evaluate_contents_case(container, Path(tmp) / "contents")
        manuals = evaluate_manual_questions(container, Path(tmp) / "manuals")
    print("\nIn-sample (every question; the XQuAD dev split and ARCD train were tuned on):\n")
    print_table(results)
    print("\nHeld out (XQuAD questions outside the dev split; ARCD test):\n")
    print_table(held)
    return {
        **run_header(settings, container),
        "ingest_seconds": ingest_s,
        "xquad_dev_split": "14 of 48 articles, random.Random(2026) (eval/datasets.py)",
        "results_held_out": {
            task: {mode: {**r.metrics, "ms_per_query": r.ms_per_query} for mode, r in m.items()}
            for task, m in held.items()
        },
        "contents_case": contents,
        "manual_questions": manuals,
        "results": {
            task: {
                mode: {**r.metrics, **r.extra, "ms_per_query": r.ms_per_query}
                for mode, r in modes_.items()
            }
            for task, modes_ in results.items()
        },
    }


def run_header(settings: Settings, container: Container) -> dict[str, Any]:
    """Date, commit, models and the retrieval settings of a results file."""
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "models": {
            "embedder": portable_model_id(container.embedder.model_id),
            "reranker": (
                portable_model_id(container.reranker.model_id) if container.reranker else None
            ),
            "questions": question_embedding(settings),
        },
        "config": {
            name: getattr(settings, name)
            for name in (
                "chunk_size",
                "chunk_overlap",
                "dense_candidates",
                "keyword_candidates",
                "rrf_k",
                "dense_weight",
                "keyword_weight",
                "keyword_coverage_power",
                "page_role_shift",
                "reranker",
                "section_paths",
                "section_chunks",
            )
        },
    }


def run_manuals(settings: Settings) -> dict[str, Any]:
    """Only the natural questions on real manuals (eval/manual_questions.py)."""
    container = Container(settings)
    with tempfile.TemporaryDirectory() as tmp:
        manuals = evaluate_manual_questions(container, Path(tmp) / "manuals")
    return {**run_header(settings, container), "manual_questions": manuals}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--provider", default="use", help="embedding provider (use, e5, ...)")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--modes", nargs="+", default=list(EVAL_MODES), choices=EVAL_MODES)
    parser.add_argument("--limit", type=int, default=None, help="questions per task")
    parser.add_argument(
        "--manuals-only", action="store_true", help="only the natural questions on manuals"
    )
    parser.add_argument(
        "--label", default="", help="suffix of the results file name (a step being measured)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(
            _env_file=None, data_dir=Path(data), embedding_provider=args.provider, env="development"
        )
        if args.manuals_only:
            report = run_manuals(settings)
        else:
            report = run(settings, args.tasks, args.modes, args.limit)
    RESULTS_DIR.mkdir(exist_ok=True)
    name = "retrieval-manuals" if args.manuals_only else "retrieval"
    suffix = f"-{args.label}" if args.label else ""
    out = RESULTS_DIR / f"{name}-{args.provider}{suffix}.json"
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
