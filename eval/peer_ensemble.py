"""A plain ensemble, as a newcomer would build one, on the same manual questions as `/search`.

What a tenant compares us with on day one is not our own arms but the retriever they would get
from a tutorial: the pages cut by LangChain's `RecursiveCharacterTextSplitter` (1,000 characters,
150 overlap, the seed design's chunking), BM25 over the chunks split on white space (`rank_bm25`,
as LangChain's `BM25Retriever` does by default), the same USE embedder as our dense arm ranking
them by cosine, and the two lists fused as LangChain's `EnsembleRetriever` fuses them: weighted
Reciprocal Rank Fusion, equal weights, c = 60, each arm giving its first `ARM_K` chunks.

Both sides read the same page text (the service's PDF loader, every page, roles included), so
the comparison is of retrieval alone, not of text extraction. Scores are page-level, as in
`eval.manuals_loo`: pages in rank order, each once; hit@1, hit@5, MRR@10 against the gold pages.
The shipped column is read from the leave-one-manual-out results of the same questions
(`--shipped`: by default the table `make eval` writes, then the held-out run's file).

    python -m eval.peer_ensemble [--manuals R-admin xfig ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from langchain_text_splitters import RecursiveCharacterTextSplitter
from rank_bm25 import BM25Okapi

from app.config import load_settings
from app.ingestion.loaders.pdf import load_pdf
from app.ingestion.parse_limits import LoadLimits
from app.providers.embeddings import build_embedder
from app.ranking_metrics import ranking_scores
from eval.manual_questions import (
    ALL_SOURCES,
    HELD_OUT_SOURCES,
    KNOWN_SOURCES,
    ManualQuestion,
    install_hint,
    load_questions,
    missing_sources,
    readable_pdf,
    resolve_gold,
)
from eval.retrieval import RESULTS_DIR, git_commit

CHUNK_SIZE, CHUNK_OVERLAP = 1000, 150
ARM_K = 10  # chunks each arm hands the ensemble (LangChain's default is 4; 10 fills MRR@10)
RRF_C = 60
METRICS = ("hit@1", "hit@5", "mrr@10")
ARMS = ("bm25", "dense", "ensemble")
# `make eval`'s leave-one-manual-out table, then the held-out run for R-intro.
SHIPPED_FILES = (RESULTS_DIR / "manuals-loo.json", RESULTS_DIR / "manuals-loo-held-out.json")


@dataclass(frozen=True)
class PeerIndex:
    """One manual cut and indexed the newcomer's way."""

    pages: list[int]  # each chunk's page (1-based)
    bm25: BM25Okapi
    vectors: np.ndarray  # unit rows, one per chunk


def whitespace_tokens(text: str) -> list[str]:
    """LangChain's BM25Retriever's default preprocessing: split on white space, nothing else."""
    return text.split()


def build_index(path: Path, embed: Any) -> PeerIndex:
    """Cut every page of the PDF into overlapping chunks, index them for BM25 and embed them."""
    splitter = RecursiveCharacterTextSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP)
    texts: list[str] = []
    pages: list[int] = []
    for page in load_pdf(readable_pdf(path), LoadLimits()):
        for piece in splitter.split_text(page.text):
            texts.append(piece)
            pages.append(page.number)
    vectors = np.asarray(embed.embed_documents(texts), dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return PeerIndex(pages, BM25Okapi([whitespace_tokens(t) for t in texts]), vectors)


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], c: int = RRF_C) -> list[int]:
    """Equal-weight RRF of chunk rankings, as LangChain's EnsembleRetriever scores them (rank
    from 1); ties keep the order in which chunks were first seen, as there. Not the service's
    `app.retrieval.fusion.reciprocal_rank_fusion`, which breaks ties on best rank, then id: the
    peer must order ties as the peer does (the first arm's chunk first)."""
    weight = 1.0 / len(rankings)
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, chunk in enumerate(ranking, start=1):
            scores[chunk] = scores.get(chunk, 0.0) + weight / (rank + c)
    return sorted(scores, key=lambda chunk: -scores[chunk])


def arm_rankings(index: PeerIndex, question: str, query_vector: np.ndarray) -> dict[str, list[int]]:
    """Chunk ids in rank order for each arm and for their fusion."""
    keyword = np.argsort(-index.bm25.get_scores(whitespace_tokens(question)), kind="stable")
    dense = np.argsort(-(index.vectors @ query_vector), kind="stable")
    bm25, vector = [int(i) for i in keyword[:ARM_K]], [int(i) for i in dense[:ARM_K]]
    return {"bm25": bm25, "dense": vector, "ensemble": reciprocal_rank_fusion([bm25, vector])}


def page_order(index: PeerIndex, chunks: Sequence[int]) -> list[str]:
    """Pages in rank order, each once."""
    return [str(p) for p in dict.fromkeys(index.pages[c] for c in chunks)]


def score_manual(
    index: PeerIndex, questions: Sequence[ManualQuestion], gold: dict[str, list[int]], embed: Any
) -> dict[str, dict[str, float]]:
    """Mean page-level metrics of each arm over one manual's questions."""
    rows: dict[str, list[dict[str, float]]] = {arm: [] for arm in ARMS}
    for question in questions:
        vector = np.asarray(embed.embed_query(question.text), dtype=np.float32)
        vector /= max(float(np.linalg.norm(vector)), 1e-12)
        relevant = {str(p) for p in gold[question.id]}
        for arm, chunks in arm_rankings(index, question.text, vector).items():
            rows[arm].append(ranking_scores(page_order(index, chunks)[:10], relevant))
    return {
        arm: {m: statistics.fmean(r[m] for r in scored) for m in METRICS}
        for arm, scored in rows.items()
    }


def shipped_scores(paths: Sequence[Path]) -> dict[str, dict[str, float]]:
    """Manual -> the shipped order's metrics in leave-one-manual-out results files (a manual
    takes its figures from the first file that has it; a missing file is skipped)."""
    shipped: dict[str, dict[str, float]] = {}
    for path in paths:
        if not path.exists():
            continue
        report = json.loads(path.read_text(encoding="utf-8"))
        for name, row in {**report.get("manuals", {}), **report.get("held_out", {})}.items():
            if "shipped" in row:
                shipped.setdefault(name, row["shipped"])
    return shipped


def _cell(scores: dict[str, float] | None) -> str:
    return " / ".join(f"{scores[m]:.3f}" for m in METRICS) if scores else "-"


def best_peer_hit5(row: dict[str, Any]) -> float:
    """The best hit@5 of the three peer rankings (BM25, dense, their ensemble)."""
    return max(float(row[arm]["hit@5"]) for arm in ARMS)


def mean_row(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each column's mean over manuals (each manual weighing the same)."""
    columns = [*ARMS, "shipped"] if all("shipped" in r for r in rows) else list(ARMS)
    mean: dict[str, Any] = {
        column: {m: statistics.fmean(r[column][m] for r in rows) for m in METRICS}
        for column in columns
    }
    mean["n"] = sum(r["n"] for r in rows)
    return mean


def print_table(report: dict[str, Any]) -> None:
    print(
        "| manual | n | peer BM25 | peer dense | peer ensemble | shipped "
        "| shipped - best peer (hit@5) | shipped - peer dense (MRR) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    development = [r for n, r in report["manuals"].items() if n not in HELD_OUT_SOURCES]
    rows = [*report["manuals"].items()]
    if development:
        rows.append(("**mean, development**", mean_row(development)))
    for name, row in rows:
        ours = row.get("shipped")
        hit5 = f"{ours['hit@5'] - best_peer_hit5(row):+.3f}" if ours else "-"
        mrr = f"{ours['mrr@10'] - row['dense']['mrr@10']:+.3f}" if ours else "-"
        cells = " | ".join(_cell(row[arm]) for arm in ARMS)
        print(f"| {name} | {row['n']} | {cells} | {_cell(ours)} | {hit5} | {mrr} |")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manuals", nargs="*", choices=list(KNOWN_SOURCES))
    parser.add_argument("--shipped", type=Path, nargs="+", default=list(SHIPPED_FILES))
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "peer-ensemble.json")
    args = parser.parse_args(argv)
    sources = {**ALL_SOURCES, **HELD_OUT_SOURCES}
    if args.manuals:
        sources = {name: sources[name] for name in args.manuals}
    missing = missing_sources(sources)
    if missing:
        names = ", ".join(source.name for source in missing)
        sys.exit(f"missing manuals: {names}; {install_hint(missing)}")
    questions = load_questions(sources=sources)
    gold = resolve_gold(questions)
    embed = build_embedder(load_settings())
    shipped = shipped_scores(args.shipped)
    report: dict[str, Any] = {"commit": git_commit(), "arm_k": ARM_K, "manuals": {}}
    for name, source in sources.items():
        started = time.perf_counter()
        mine = [q for q in questions if q.manual == name]
        row: dict[str, Any] = score_manual(build_index(source.path, embed), mine, gold, embed)
        row["n"] = len(mine)
        if name in shipped:
            row["shipped"] = shipped[name]
        report["manuals"][name] = row
        print(f"{name}: {len(mine)} questions, {time.perf_counter() - started:.0f} s", flush=True)
    print_table(report)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
