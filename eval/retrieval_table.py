"""One retrieval table: every set x every retriever, nDCG@10 and recall@10, chunk- and
document-level, each with a bootstrap 95% confidence interval.

    python -m eval.retrieval_table [--sets ...] [--variants ...] [--limit N]
    python -m eval.retrieval_table --render       # the markdown tables of the last results file
    python -m eval.retrieval_table --render --compare BEFORE.json   # one change, every set

Sets: XQuAD en-en, ar-ar, ar-en, en-ar (test part: the questions outside the dev split), ARCD test
(all test), and the parallel sets of eval/parallel_sets.py (tuning and test parts). Every
paragraph is ingested as its own document through the service pipeline (eval/retrieval.py), and
every variant searches through the service's own retriever (`HybridRetriever.search`) over the
same stored vectors and keyword index, or, for the Haystack-style baseline, through the fusion of
eval/retrieval.py.

Levels: chunk-level reads the top 10 chunks as `/search` returns them (several chunks of one
document take several places); document-level collapses the ranked chunks to their documents
(best chunk first) and reads the top 10 documents. Each question has one gold document.

Writes eval/results/retrieval-table.json (with per-question ranks, so variants can be compared
pairwise without a rerun).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from app.config import FusionMethod, load_settings
from app.container import Container
from app.providers.embeddings import use_embedder
from app.providers.types import Embedder
from app.retrieval.evidence import main_script
from app.retrieval.function_words import function_word_tokens
from app.retrieval.hybrid import HybridRetriever, RetrievalMode
from app.retrieval.keyword import token_script
from app.text.tokenizer import DEFAULT_TOKENIZER
from eval.datasets import Question, RetrievalTask, load_task, xquad_split
from eval.parallel_sets import PARALLEL_TASKS, SOURCES, load_parallel_task
from eval.retrieval import (
    CORPUS_OF_TASK,
    PLAIN_RRF,
    RESULTS_DIR,
    ingest_paragraphs,
    ranked_chunk_documents,
    run_header,
)

XQUAD_SETS = ("xquad-en-en", "xquad-ar-ar", "xquad-ar-en", "xquad-en-ar")
SETS = (*XQUAD_SETS, "arcd-test", *PARALLEL_TASKS)
RESULTS_FILE = RESULTS_DIR / "retrieval-table.json"
BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 2026
TOP = 10


@dataclass(frozen=True)
class Variant:
    """A retriever measured in the table: a service mode, with or without the USE question
    centring and the keyword gate; or an eval baseline (`baseline` names it)."""

    mode: RetrievalMode
    centred: bool = True
    keyword_gate: bool = False
    baseline: str | None = None
    # The fusion method (RAG_FUSION); None: the settings' own.
    fusion: FusionMethod | None = None
    # With the English arm when RAG_ENGLISH_EMBEDDING sets one (False: the first embedder alone,
    # the same stored vectors: the option's before and after in one run).
    english_arm: bool = True


VARIANTS: dict[str, Variant] = {
    "bm25": Variant("keyword"),
    "dense": Variant("dense"),
    "dense-uncentred": Variant("dense", centred=False),
    "hybrid": Variant("hybrid"),
    "hybrid-uncentred": Variant("hybrid", centred=False),
    "hybrid-gated": Variant("hybrid", keyword_gate=True),
    "hybrid-gated-uncentred": Variant("hybrid", centred=False, keyword_gate=True),
    "plain-rrf": Variant("hybrid", centred=False, baseline=PLAIN_RRF),
    "rrf-gated-uncentred": Variant("hybrid", centred=False, keyword_gate=True, fusion="rrf"),
    "scores-gated-uncentred": Variant("hybrid", centred=False, keyword_gate=True, fusion="scores"),
    "dense-uncentred-first-arm": Variant("dense", centred=False, english_arm=False),
    "hybrid-gated-uncentred-first-arm": Variant(
        "hybrid", centred=False, keyword_gate=True, english_arm=False
    ),
}


@dataclass(frozen=True)
class EvalSet:
    """A task with the corpus (tenant) it is asked over and its parts."""

    task: RetrievalTask
    tenant: str
    parts: dict[str, list[Question]]


def load_set(name: str) -> EvalSet:
    """A set with its parts: `tuning` and `test` for the parallel sets, `test` alone for XQuAD
    (the questions outside the dev split) and ARCD test."""
    if name in PARALLEL_TASKS:
        task, tuning, test = load_parallel_task(name)
        domain, _, doc_lang = name.split("-")
        return EvalSet(task, f"{domain}-{doc_lang}", {"tuning": tuning, "test": test})
    task = load_task(name)
    if name in XQUAD_SETS:
        # The dev split was tuned on long before (eval/tune_fusion.py); only its rest is read.
        return EvalSet(task, CORPUS_OF_TASK[name], {"test": xquad_split(task)[1]})
    return EvalSet(task, CORPUS_OF_TASK[name], {"test": task.questions})


def first_gold_rank(ranked: list[str], gold: frozenset[str]) -> int:
    """1-based rank of the first gold id within the top 10, 0 when none is there."""
    for position, item in enumerate(ranked[:TOP], start=1):
        if item in gold:
            return position
    return 0


def ranks(chunk_docs: list[str], gold: frozenset[str]) -> tuple[int, int]:
    """(chunk-level, document-level) rank of the gold document."""
    return first_gold_rank(chunk_docs, gold), first_gold_rank(list(dict.fromkeys(chunk_docs)), gold)


def ndcg(rank: int) -> float:
    """nDCG@10 with one relevant item at `rank` (0: not in the top 10)."""
    return 1.0 / math.log2(rank + 1) if rank else 0.0


def bootstrap(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and its 95% percentile bootstrap interval (fixed seed)."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = rng.integers(0, len(values), size=(BOOTSTRAP_SAMPLES, len(values)))
    means = values[picks].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), float(low), float(high)


def metrics(rank_pairs: list[list[int]]) -> dict[str, list[float]]:
    """nDCG@10 and recall@10 at both levels, each [mean, low, high]."""
    arr = np.asarray(rank_pairs, dtype=float).reshape(-1, 2)
    out = {}
    for level, column in (("chunk", 0), ("doc", 1)):
        r = arr[:, column]
        gains = np.asarray([ndcg(int(rank)) for rank in r])
        out[f"{level}_ndcg@10"] = [round(v, 4) for v in bootstrap(gains)]
        out[f"{level}_recall@10"] = [round(v, 4) for v in bootstrap((r > 0).astype(float))]
    return out


def paired_difference(a: list[list[int]], b: list[list[int]], level: str = "doc") -> list[float]:
    """nDCG@10 of a minus b (same questions), with its paired bootstrap interval."""
    column = 0 if level == "chunk" else 1
    gains_a = np.asarray([ndcg(r[column]) for r in a])
    gains_b = np.asarray([ndcg(r[column]) for r in b])
    return [round(v, 4) for v in bootstrap(gains_a - gains_b)]


class Searchers:
    """The retriever of each variant, sharing the container's store and keyword index."""

    def __init__(self, container: Container) -> None:
        self.container = container

    @cache  # noqa: B019 - one per variant for the length of a run
    def embedder(self, centred: bool) -> Embedder:
        settings = self.container.settings
        if settings.embedding_provider != "use":
            return self.container.embedder
        return use_embedder(settings.embedding_threads, settings.embedding_batch_size, centred)

    @cache  # noqa: B019
    def retriever(
        self,
        centred: bool,
        keyword_gate: bool,
        fusion: FusionMethod | None = None,
        english_arm: bool = True,
    ) -> HybridRetriever:
        base = self.container.retriever
        config = replace(base.config, keyword_gate=keyword_gate, centred_questions=centred)
        if fusion is not None:
            config = replace(config, fusion=fusion)
        return HybridRetriever(
            self.embedder(centred),
            base.store,
            base.keyword_index,
            config,
            base.reranker,
            english=base.english if english_arm else None,  # RAG_ENGLISH_EMBEDDING
        )

    def search(self, variant: Variant) -> Callable[[str, str], list[str]]:
        """(tenant, query) -> the document of each ranked chunk."""
        if variant.baseline is not None:
            mode = variant.baseline
            return lambda tenant, q: ranked_chunk_documents(self.container, tenant, q, mode)
        retriever = self.retriever(
            variant.centred, variant.keyword_gate, variant.fusion, variant.english_arm
        )
        return lambda tenant, q: ranked_chunk_documents(
            self.container, tenant, q, variant.mode, retriever
        )


def evaluate(
    container: Container,
    evalset: EvalSet,
    doc_map: dict[str, str],
    variants: list[str],
) -> dict[str, Any]:
    """Per part and variant: metrics, ms/query and the per-question (chunk, doc) ranks."""
    searchers = Searchers(container)
    out: dict[str, Any] = {}
    for part, questions in evalset.parts.items():
        out[part] = {"questions": len(questions), "rule_subset": gate_subset(evalset, part)}
        for name in variants:
            search = searchers.search(VARIANTS[name])
            pairs, started = [], time.perf_counter()
            for question in questions:
                docs = [doc_map.get(d, d) for d in search(evalset.tenant, question.text)]
                pairs.append(list(ranks(docs, question.gold)))
            elapsed = (time.perf_counter() - started) * 1000 / max(len(questions), 1)
            out[part][name] = {**metrics(pairs), "ms_per_query": round(elapsed, 1), "ranks": pairs}
    return out


def capped(evalset: EvalSet, limit: int | None, cap: int | None) -> EvalSet:
    """`limit` questions of each part (a seeded draw) over at most `cap` documents: their gold
    documents and seeded distractors (as the outside test had: 100 questions, 300 documents)."""
    rng = random.Random(BOOTSTRAP_SEED)
    parts = {
        p: sorted(rng.sample(qs, limit), key=lambda q: q.id) if limit and limit < len(qs) else qs
        for p, qs in evalset.parts.items()
    }
    paragraphs = evalset.task.paragraphs
    if cap is not None and len(paragraphs) > cap:
        kept = {d for qs in parts.values() for q in qs for d in q.gold}
        rest = sorted(set(paragraphs) - kept)
        kept.update(random.Random(BOOTSTRAP_SEED).sample(rest, max(0, cap - len(kept))))
        paragraphs = {pid: text for pid, text in paragraphs.items() if pid in kept}
    task = RetrievalTask(evalset.task.name, paragraphs, [q for qs in parts.values() for q in qs])
    return EvalSet(task, evalset.tenant, parts)


def run(
    sets: list[str],
    variants: list[str],
    limit: int | None,
    cap: int | None,
    out: Path,
) -> dict[str, Any]:
    """Ingest each corpus once, evaluate every set, return the report (written to `out` after
    every set, merged into what `out` held)."""
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(
            _env_file=None, data_dir=Path(data), embedding_provider="use", env="development"
        )
        container = Container(settings)
        corpora: dict[str, dict[str, str]] = {}
        ingest_s: dict[str, float] = {}
        results: dict[str, Any] = {}
        report: dict[str, Any] = {
            **run_header(settings, container),
            "sources": {k: {**vars(v), "version": v.version()} for k, v in SOURCES.items()},
            "cap": {"questions_per_part": limit, "documents_per_parallel_corpus": cap},
            "ingest_seconds": ingest_s,
            "variants": {k: vars(v) for k, v in VARIANTS.items() if k in variants},
            "results": results,
        }
        previous = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
        for name in sets:
            evalset = load_set(name)
            evalset = capped(evalset, limit, cap if name in PARALLEL_TASKS else None)
            if evalset.tenant not in corpora:
                started = time.perf_counter()
                corpora[evalset.tenant] = ingest_paragraphs(
                    container,
                    evalset.tenant,
                    evalset.task.paragraphs,
                    Path(data) / "files" / evalset.tenant,
                )
                ingest_s[evalset.tenant] = round(time.perf_counter() - started, 1)
                print(f"ingested {evalset.tenant} in {ingest_s[evalset.tenant]} s", flush=True)
            results[name] = evaluate(container, evalset, corpora[evalset.tenant], variants)
            print(render_set(name, results[name]), flush=True)
            merged = {**previous.get("results", {}), **results}
            out.write_text(
                json.dumps({**report, "results": merged}, ensure_ascii=False) + "\n",
                encoding="utf-8",
            )
        return report


def _header(*cells: str) -> list[str]:
    """A markdown table's header and separator lines."""
    return ["| " + " | ".join(cells) + " |", "|" + "---|" * len(cells)]


def _cell(values: list[float]) -> str:
    mean, low, high = values
    return f"{mean:.3f} ({low:.2f}-{high:.2f})"


def render_set(name: str, result: dict[str, Any], part: str | None = None) -> str:
    """Markdown rows of one set: one per part and variant."""
    lines = []
    for part_name, by_variant in result.items():
        if part is not None and part_name != part:
            continue
        for variant, r in by_variant.items():
            if variant in ("questions", "rule_subset"):
                continue
            lines.append(
                f"| {name} | {part_name} ({by_variant['questions']}) | {variant} | "
                f"{_cell(r['doc_ndcg@10'])} | {_cell(r['doc_recall@10'])} | "
                f"{_cell(r['chunk_ndcg@10'])} | {_cell(r['chunk_recall@10'])} |"
            )
    return "\n".join(lines)


HEADER = (
    "| set | part (questions) | retriever | doc nDCG@10 | doc recall@10 | chunk nDCG@10 | "
    "chunk recall@10 |\n|---|---|---|---|---|---|---|"
)


def render(report: dict[str, Any], part: str | None = "test") -> str:
    """The whole table (one part, or every part with `part=None`)."""
    rows = [render_set(name, result, part) for name, result in report["results"].items()]
    return "\n".join([HEADER, *[r for r in rows if r]])


def render_differences(report: dict[str, Any], pairs: list[tuple[str, str]]) -> str:
    """Paired doc- and chunk-level nDCG@10 differences (a - b) on every set's test part."""
    lines = _header("set", "a - b", "doc nDCG@10 difference", "chunk nDCG@10 difference")
    for name, result in report["results"].items():
        test = result.get("test", {})
        for a, b in pairs:
            if a not in test or b not in test:
                continue
            cells = []
            for level in ("doc", "chunk"):
                if "ranks" in test[a] and "ranks" in test[b]:
                    d = paired_difference(test[a]["ranks"], test[b]["ranks"], level)
                    cells.append(f"{d[0]:+.3f} ({d[1]:+.3f}..{d[2]:+.3f})")
                else:  # a run that kept no per-question ranks: the difference of the means
                    key = f"{level}_ndcg@10"
                    cells.append(f"{test[a][key][0] - test[b][key][0]:+.3f}")
            lines.append(f"| {name} | {a} - {b} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def render_change(before: dict[str, Any], after: dict[str, Any]) -> str:
    """One change, every set and part, the service's dense and hybrid as it runs them: doc-level
    nDCG@10 and recall@10 of two runs, and the paired nDCG@10 difference (after - before)."""
    now = service_variants()
    lines = _header(
        "set",
        "part",
        "retriever",
        "nDCG@10 before",
        "nDCG@10 after",
        "difference (95% CI)",
        "recall@10 before -> after",
    )
    for name, result in after["results"].items():
        for part, r in result.items():
            old = before["results"].get(name, {}).get(part, {})
            for label, variant in now.items():
                if variant not in r or variant not in old:
                    continue
                a, b = r[variant], old[variant]
                d = paired_difference(a["ranks"], b["ranks"])
                lines.append(
                    f"| {name} | {part} | {label} | {b['doc_ndcg@10'][0]:.3f} | "
                    f"{a['doc_ndcg@10'][0]:.3f} | {d[0]:+.3f} ({d[1]:+.3f}..{d[2]:+.3f}) | "
                    f"{b['doc_recall@10'][0]:.2f} -> {a['doc_recall@10'][0]:.2f} |"
                )
    return "\n".join(lines)


def gate_subset(evalset: EvalSet, part: str) -> list[bool]:
    """Per question of the part: is it one the keyword rule is about? Its script differs from
    the corpus's, or none of its words other than function words and numbers is a word of the
    corpus (the service tokenizer and function words; the corpus's vocabulary is its
    paragraphs', which its chunks share)."""
    vocabulary = {t for text in evalset.task.paragraphs.values() for t in DEFAULT_TOKENIZER(text)}
    corpus_script = main_script(list(vocabulary))
    skip = function_word_tokens(DEFAULT_TOKENIZER)
    flags = []
    for question in evalset.parts[part]:
        tokens = DEFAULT_TOKENIZER(question.text)
        content = [t for t in tokens if t not in skip and token_script(t) != "digits"]
        cross = main_script(tokens) != corpus_script
        flags.append(cross or not any(t in vocabulary for t in content))
    return flags


def render_subset(report: dict[str, Any], a: str, b: str) -> str:
    """Doc-level nDCG@10 of a and b on each set's test questions the keyword rule is about."""
    lines = _header("set", "questions in the subset", a, b, f"{a} - {b}")
    for name, result in report["results"].items():
        test = result.get("test", {})
        if "ranks" not in test.get(a, {}) or "ranks" not in test.get(b, {}):
            continue
        flags = test["rule_subset"]
        ranks_a = [r for r, f in zip(test[a]["ranks"], flags, strict=True) if f]
        ranks_b = [r for r, f in zip(test[b]["ranks"], flags, strict=True) if f]
        if not ranks_a:
            lines.append(f"| {name} | 0 of {len(flags)} | | | |")
            continue
        diff = paired_difference(ranks_a, ranks_b)
        mean_a = metrics(ranks_a)["doc_ndcg@10"][0]
        mean_b = metrics(ranks_b)["doc_ndcg@10"][0]
        lines.append(
            f"| {name} | {len(ranks_a)} of {len(flags)} | {mean_a:.3f} | {mean_b:.3f} | "
            f"{diff[0]:+.3f} ({diff[1]:+.3f}..{diff[2]:+.3f}) |"
        )
    return "\n".join(lines)


# The release before the retrieval table: centred questions, no keyword gate.
BEFORE = {"dense": "dense", "hybrid": "hybrid"}


def service_variants() -> dict[str, str]:
    """The variants the service runs with today's default settings."""
    settings = load_settings(_env_file=None)
    centred = "" if settings.use_question_centring else "-uncentred"
    gated = "-gated" if settings.keyword_gate else ""
    return {"dense": f"dense{centred}", "hybrid": f"hybrid{gated}{centred}"}


def render_summary(report: dict[str, Any]) -> str:
    """The short table: test parts, doc-level nDCG@10 of each retriever as the service runs it,
    and the hybrid's doc- and chunk-level recall@10."""
    now = service_variants()
    lines = _header(
        "set (test questions)",
        "BM25",
        "dense",
        "hybrid (ours)",
        "plain RRF",
        "hybrid recall@10, doc / chunk",
    )
    for name, result in report["results"].items():
        test = result["test"]
        cells = [
            _cell(test[v]["doc_ndcg@10"]) if v in test else ""
            for v in ("bm25", now["dense"], now["hybrid"], "plain-rrf")
        ]
        hybrid = test.get(now["hybrid"])
        recall = (
            f"{hybrid['doc_recall@10'][0]:.3f} / {hybrid['chunk_recall@10'][0]:.3f}"
            if hybrid
            else ""
        )
        lines.append(f"| {name} ({test['questions']}) | " + " | ".join([*cells, recall]) + " |")
    return "\n".join(lines)


def render_before_after(report: dict[str, Any]) -> str:
    """Doc- and chunk-level nDCG@10 of dense and hybrid, the previous release and now, every set."""
    now = service_variants()
    lines = _header(
        "set",
        "part",
        "dense before",
        "dense now",
        "hybrid before",
        "hybrid now",
        "hybrid now, chunk-level (before)",
    )
    for name, result in report["results"].items():
        for part, r in result.items():
            keys = [BEFORE["dense"], now["dense"], BEFORE["hybrid"], now["hybrid"]]
            if not all(k in r for k in keys):
                continue
            doc = [f"{r[k]['doc_ndcg@10'][0]:.3f}" for k in keys]
            chunk = (
                f"{r[now['hybrid']]['chunk_ndcg@10'][0]:.3f} "
                f"({r[BEFORE['hybrid']]['chunk_ndcg@10'][0]:.3f})"
            )
            lines.append(f"| {name} | {part} | " + " | ".join([*doc, chunk]) + " |")
    return "\n".join(lines)


DECISION_PAIRS = [
    ("dense", "dense-uncentred"),  # the question centring
    ("hybrid-gated", "hybrid"),  # the keyword gate, centred questions
    ("hybrid-gated-uncentred", "hybrid-uncentred"),  # the keyword gate, the default questions
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--limit", type=int, default=None, help="questions per part")
    parser.add_argument(
        "--cap", type=int, default=None, help="documents per parallel-set corpus (gold first)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS_FILE)
    parser.add_argument("--render", action="store_true", help="print the tables of --out")
    parser.add_argument(
        "--compare",
        type=Path,
        default=None,
        help="a results file of before a change: print "
        "every set's change against it (same questions) and nothing else",
    )
    args = parser.parse_args()
    if args.compare is not None and args.render:
        before = json.loads(args.compare.read_text(encoding="utf-8"))
        print(render_change(before, json.loads(args.out.read_text(encoding="utf-8"))))
        return
    if not args.render:
        args.out.parent.mkdir(exist_ok=True)
        run(args.sets, args.variants, args.limit, args.cap, args.out)
        print(f"wrote {args.out}")
    report = json.loads(args.out.read_text(encoding="utf-8"))
    print(render_summary(report))
    print()
    print(render_before_after(report))
    print()
    print(render(report, None))
    print()
    print(render_differences(report, DECISION_PAIRS))
    for a, b in (
        ("hybrid-uncentred", "dense-uncentred"),
        ("hybrid-gated-uncentred", "dense-uncentred"),
    ):
        print()
        print(render_subset(report, a, b))


if __name__ == "__main__":
    main()
