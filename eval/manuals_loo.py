"""Leave-one-manual-out: every fusion choice judged on a manual it was not chosen on.

Each manual is indexed once into its own tenant and each question's arms are run once through
the real retriever (`HybridRetriever.recall`, with wide pools, every candidate's chunk loaded).
The recalls are cached on disk (keyed by the manual's bytes, the questions and the code's
retrieval settings), so scoring a fusion family is a matter of seconds.

For every manual in turn, each family's parameters are chosen on the other manuals (mean
MRR@10 over their questions, each manual weighing the same, less `--guard` times how far each
falls under that manual's better arm) and scored on the one left out. Reported per manual: BM25,
dense, the shipped order (today's defaults, `RAG_*`), each family left-one-out, and "hybrid
minus its better arm".

    python -m eval.manuals_loo [--manuals R-admin gnuplot ...] [--refresh] [--families ...]
    python -m eval.manuals_loo --english-model DIR   # English manuals with another dense model
    python -m eval.manuals_loo --english-embedding minilm   # RAG_ENGLISH_EMBEDDING, as /search
    python -m eval.manuals_loo --second-embedding e5   # RAG_SECOND_EMBEDDING, as /search
    python -m eval.manuals_loo --section-paths keyword   # manuals indexed with section paths
    python -m eval.manuals_loo --skip-pronouns   # BM25 without the questions' pronouns
    python -m eval.manuals_loo --pronoun-weight 0.4   # the pronouns at 0.4 of their BM25 weight
    python -m eval.manuals_loo --held-out   # also the held-out manuals, never chosen on
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.config import Settings, load_settings
from app.container import Container
from app.domain import section_path
from app.retrieval.hybrid import Recall, RetrieverConfig
from eval.fusion_families import FAMILIES, Family, shipped_order
from eval.manual_questions import (
    ALL_SOURCES,
    HELD_OUT_SOURCES,
    KNOWN_SOURCES,
    ManualQuestion,
    ingest_manual,
    load_questions,
    missing_sources,
    resolve_gold,
)
from eval.metrics import ranking_scores
from eval.query_signals import CountedRecall, as_counted, counted
from eval.retrieval import RESULTS_DIR, git_commit

CACHE_DIR = Path(__file__).resolve().parent / ".cache"
# What `make eval` scores: weighted rank fusion, score fusion with least spreads, and the
# shipped blend of both (with the dense arm's first candidate kept in the first places).
DEFAULT_FAMILIES = ("rrf", "scores-floored", "blend")
# Each arm is asked for this many times its configured candidates, so that families that take
# deeper pools than the shipped 30 can be scored from the same recall.
POOL_FACTOR = 4
# Bumped when the cached recalls gain fields the families read (2: the query words' chunk
# counts, `CountedRecall`).
RECALL_FORMAT = 2


@dataclass
class Asked:
    """One question, its gold pages and what the arms found (chunks loaded)."""

    question: ManualQuestion
    gold: frozenset[int]
    recall: CountedRecall


Order = Callable[[Asked], list[str]]


def page_ranking(asked: Asked, ordered: Iterable[str]) -> list[int]:
    """Pages in rank order, each once."""
    pages: dict[int, None] = {}
    for cid in ordered:
        chunk = asked.recall.candidates[cid].chunk
        if chunk is not None:
            pages.setdefault(chunk.page, None)
    return list(pages)


def question_scores(asked: Asked, ordered: Sequence[str]) -> dict[str, float]:
    """hit@1, hit@5 and MRR@10 of one question's page ranking."""
    pages = [str(p) for p in page_ranking(asked, ordered)[:10]]
    return ranking_scores(pages, {str(p) for p in asked.gold})


def summary(asked: Sequence[Asked], order: Order) -> dict[str, float]:
    """Mean metrics of one ordering over questions."""
    rows = [question_scores(a, order(a)) for a in asked]
    return {m: statistics.fmean(r[m] for r in rows) for m in ("hit@1", "hit@5", "mrr@10")}


# --- recall, once per manual, cached ---


def _cache_key(manual: str, questions: list[ManualQuestion], settings: Settings) -> str:
    digest = hashlib.sha256()
    digest.update(KNOWN_SOURCES[manual].path.read_bytes())
    for q in questions:
        digest.update(f"{q.id}\0{q.text}\0".encode())
    for name in (
        "embedding_provider",
        "embedding_model",
        "chunk_size",
        "chunk_overlap",
        "section_paths",
    ):
        digest.update(f"{name}={getattr(settings, name)}\0".encode())
    if settings.keyword_pronoun_weight != 1.0:
        digest.update(f"keyword_pronoun_weight={settings.keyword_pronoun_weight}\0".encode())
    if settings.english_embedding != "none":
        digest.update(f"english_embedding={settings.english_embedding}\0".encode())
    if settings.second_embedding != "none":
        digest.update(f"second_embedding={settings.second_embedding}\0".encode())
    digest.update(f"pool={POOL_FACTOR}\0recall={RECALL_FORMAT}".encode())
    return f"{manual}-{digest.hexdigest()[:16]}"


def _recall_all(
    container: Container, manual: str, questions: list[ManualQuestion], coverage_file: Path
) -> list[CountedRecall]:
    retriever = container.retriever
    started = time.perf_counter()
    tenant = ingest_manual(container, manual)
    indexed = time.perf_counter() - started
    chunks = list(container.corpus.iter_chunks(tenant))
    with_path = sum(section_path(c) is not None for c in chunks)
    coverage_file.write_text(json.dumps({"chunks": len(chunks), "with_path": with_path}) + "\n")
    recalls = []
    keyword_index = retriever.keyword_index
    started = time.perf_counter()
    for question in questions:
        recall = retriever.recall(tenant, question.text, "hybrid", pool_factor=POOL_FACTOR)
        if retriever.second is not None:
            searched = retriever.recall(tenant, question.text, "hybrid")
            recall = with_searched_dense_head(recall, searched, retriever.config.dense_candidates)
        ids = list(recall.candidates)
        retriever._materialise(tenant, ids, recall.candidates, len(ids))
        recall.query_vector = None  # not needed for scoring; keeps the cache small
        snapshot = keyword_index.snapshot(tenant)
        recalls.append(counted(recall, snapshot, keyword_index.tokenizer, question.text))
    print(
        f"{manual}: {len(chunks)} chunks indexed in {indexed:.1f} s, "
        f"{len(questions)} questions asked in {time.perf_counter() - started:.1f} s"
    )
    return recalls


# The first arm's and the second arm's evidence on a candidate (RAG_SECOND_EMBEDDING).
_DENSE_FIELDS = ("dense_rank", "dense_score", "second_dense_rank", "second_dense_score")


def with_searched_dense_head(deep: Recall, searched: Recall, depth: int) -> Recall:
    """`deep` (each arm asked for `POOL_FACTOR` times its candidates) with its first `depth`
    dense candidates as /search ranks them (`searched`, asked at the configured depth), the
    rest of its dense list after them. With a second dense arm the dense list is the RRF of
    both arms' lists, so its head depends on how deep each arm was asked: cutting the fusion of
    two 120-lists to 30 is not the fusion of two 30-lists."""
    head = searched.dense_ids[:depth]
    for chunk_id in head:
        seen = searched.candidates[chunk_id]
        candidate = deep.candidate(chunk_id)
        candidate.chunk = candidate.chunk or seen.chunk
        for name in _DENSE_FIELDS:
            setattr(candidate, name, getattr(seen, name))
    taken = set(head)
    deep.dense_ids = head + [chunk_id for chunk_id in deep.dense_ids if chunk_id not in taken]
    return deep


def asked_for(
    manuals: list[str], settings: Settings, refresh: bool, english: Settings | None = None
) -> dict[str, list[Asked]]:
    """Manual -> its questions with their recall, from the cache when it is current; English
    manuals with the `english` settings when given (a dense arm chosen by language)."""
    if english is not None:
        groups = {"en": [m for m in manuals if KNOWN_SOURCES[m].language == "en"]}
        others = [m for m in manuals if m not in groups["en"]]
        found = asked_for(groups["en"], english, refresh)
        found.update(asked_for(others, settings, refresh))
        return {m: found[m] for m in manuals}
    questions = load_questions(sources=KNOWN_SOURCES)
    CACHE_DIR.mkdir(exist_ok=True)
    out: dict[str, list[Asked]] = {}
    container: Container | None = None
    for manual in manuals:
        mine = [q for q in questions if q.manual == manual]
        gold = resolve_gold(mine)
        path = CACHE_DIR / f"{_cache_key(manual, mine, settings)}.pickle"
        if path.is_file() and not refresh:
            recalls = [as_counted(r) for r in pickle.loads(path.read_bytes())]
        else:
            container = container or Container(settings)
            started = time.perf_counter()
            recalls = _recall_all(container, manual, mine, path.with_suffix(".coverage.json"))
            print(f"{manual}: indexed and asked in {time.perf_counter() - started:.0f} s")
            path.write_bytes(pickle.dumps(recalls))
        out[manual] = [
            Asked(q, frozenset(gold[q.id]), r) for q, r in zip(mine, recalls, strict=True)
        ]
    return out


def section_coverage(manuals: list[str], settings: Settings) -> dict[str, dict[str, int]]:
    """Manual -> its chunk count and how many carry a section path, as recorded when its
    recalls were cached (manuals cached before this was recorded are left out)."""
    questions = load_questions(sources=ALL_SOURCES)
    out = {}
    for manual in manuals:
        mine = [q for q in questions if q.manual == manual]
        path = CACHE_DIR / f"{_cache_key(manual, mine, settings)}.coverage.json"
        if path.is_file():
            out[manual] = json.loads(path.read_text())
    return out


# --- leave one manual out ---


def family_table(family: Family, sets: dict[str, list[Asked]]) -> list[dict[str, Any]]:
    """Every grid point of the family scored on every manual (computed once for all folds)."""
    table = []
    for params in family.grid:
        ranked = family.order(params)

        def order(asked: Asked, ranked: Callable[[Recall, str], list[str]] = ranked) -> list[str]:
            return ranked(asked.recall, asked.question.text)

        table.append({"params": params, **{m: summary(a, order) for m, a in sets.items()}})
    return table


def choose(
    table: list[dict[str, Any]],
    train: Sequence[str],
    arms: dict[str, dict[str, float]] | None = None,
    guard: float = 0.0,
) -> dict[str, Any]:
    """The grid point with the best mean (over the train manuals) MRR@10, less `guard` times
    its mean shortfall (MRR@10 and hit@5) under each train manual's better arm (`arms`)."""

    def merit(row: dict[str, Any]) -> float:
        total = 0.0
        for m in train:
            total += row[m]["mrr@10"]
            if arms and guard:
                for metric in ("mrr@10", "hit@5"):
                    total -= guard * max(0.0, arms[m][metric] - row[m][metric])
        return total / len(train)

    return max(table, key=merit)


def better_arm(
    sets: dict[str, list[Asked]], config: RetrieverConfig
) -> dict[str, dict[str, float]]:
    """Per manual, the better of the two arms on each metric."""
    out = {}
    for manual, asked in sets.items():
        keyword = summary(asked, lambda a: a.recall.keyword_ids[: config.keyword_candidates])
        dense = summary(asked, lambda a: a.recall.dense_ids[: config.dense_candidates])
        out[manual] = {m: max(keyword[m], dense[m]) for m in keyword}
    return out


def leave_one_out(
    sets: dict[str, list[Asked]],
    config: RetrieverConfig,
    families: Sequence[Family],
    guard: float = 0.0,
) -> dict[str, Any]:
    """Per held-out manual: the arms, the shipped order and each family chosen on the rest
    (`guard`: see `choose`)."""
    tables = {family.name: family_table(family, sets) for family in families}
    arms = better_arm(sets, config)
    report: dict[str, Any] = {}
    for manual, held_out in sets.items():
        train = [m for m in sets if m != manual] or [manual]
        row: dict[str, Any] = {
            "keyword": summary(
                held_out, lambda a: a.recall.keyword_ids[: config.keyword_candidates]
            ),
            "dense": summary(held_out, lambda a: a.recall.dense_ids[: config.dense_candidates]),
            "shipped": summary(
                held_out, lambda a: shipped_order(a.recall, a.question.text, config)
            ),
        }
        for name, table in tables.items():
            best = choose(table, train, arms, guard)
            row[name] = {**best[manual], "params": best["params"]}
        report[manual] = row
    return report


def held_out(
    sets: dict[str, list[Asked]],
    held: dict[str, list[Asked]],
    config: RetrieverConfig,
    families: Sequence[Family],
    guard: float = 0.0,
) -> dict[str, Any]:
    """Per held-out manual: the arms, the shipped order and each family with the parameters
    chosen on every development manual (the held-out ones never choose anything)."""
    arms = better_arm(sets, config)
    tables = {family.name: family_table(family, {**sets, **held}) for family in families}
    report: dict[str, Any] = {}
    for manual, asked in held.items():
        row: dict[str, Any] = {
            "keyword": summary(asked, lambda a: a.recall.keyword_ids[: config.keyword_candidates]),
            "dense": summary(asked, lambda a: a.recall.dense_ids[: config.dense_candidates]),
            "shipped": summary(asked, lambda a: shipped_order(a.recall, a.question.text, config)),
            "n": len(asked),
        }
        for name, table in tables.items():
            best = choose(table, list(sets), arms, guard)
            row[name] = {**best[manual], "params": best["params"]}
        report[manual] = row
    return report


def print_report(report: dict[str, Any], columns: list[str]) -> None:
    """One markdown table: manual x column, hit@1 / hit@5 / MRR@10, and hybrid minus best arm."""
    print("\n| manual | n | " + " | ".join(columns) + " | best column - better arm (MRR) |")
    print("|---|---|" + "---|" * len(columns) + "---|")
    for manual, row in report.items():
        cells = [
            f"{row[c]['hit@1']:.3f} / {row[c]['hit@5']:.3f} / {row[c]['mrr@10']:.3f}"
            for c in columns
        ]
        arm = max(row["keyword"]["mrr@10"], row["dense"]["mrr@10"])
        fused = [c for c in columns if c not in ("keyword", "dense")]
        margins = ", ".join(f"{c} {row[c]['mrr@10'] - arm:+.3f}" for c in fused)
        print(f"| {manual} | {row['n']} | " + " | ".join(cells) + f" | {margins} |")


def verdict(report: dict[str, Any], column: str) -> dict[str, Any]:
    """Where a fused column falls under its manual's better arm (hit@5 and MRR@10 cells) and
    its largest MRR@10 loss against the shipped order, over every manual of `report`."""
    under = []
    for manual, row in report.items():
        for metric in ("hit@5", "mrr@10"):
            margin = row[column][metric] - max(row["keyword"][metric], row["dense"][metric])
            if margin < -1e-9:
                under.append(f"{manual} {metric} {margin:+.3f}")
    losses = {m: row[column]["mrr@10"] - row["shipped"]["mrr@10"] for m, row in report.items()}
    worst = min(losses, key=losses.__getitem__)
    return {
        "cells_under_arm": len(under),
        "under": under,
        "worst_vs_shipped": losses[worst],
        "worst_vs_shipped_manual": worst,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--manuals", nargs="+", default=None, help="default: every installed one")
    parser.add_argument("--refresh", action="store_true", help="re-index and re-ask, ignore cache")
    parser.add_argument(
        "--families",
        nargs="+",
        default=list(DEFAULT_FAMILIES),
        help=f"of {', '.join(f.name for f in FAMILIES)}",
    )
    parser.add_argument(
        "--guard",
        type=float,
        default=1.0,
        help="choose parameters by mean MRR@10 less this times the shortfall under the better arm "
        "(MRR@10 and hit@5 on each train manual); 0: by mean MRR@10 alone",
    )
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="also score the held-out manuals (R-intro), parameters chosen on all the others",
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "manuals-loo.json")
    parser.add_argument(
        "--english-model",
        default=None,
        help="a sentence-transformers folder: the dense arm of the English manuals (the others "
        "keep the default embedder)",
    )
    parser.add_argument(
        "--english-embedding",
        choices=("none", "minilm"),
        default=None,
        help="ask with this RAG_ENGLISH_EMBEDDING (the English arm, routed by language as "
        "/search routes it; its fusion values ENGLISH_FUSION apply to `shipped`)",
    )
    parser.add_argument(
        "--second-embedding",
        choices=("none", "e5"),
        default=None,
        help="ask with this RAG_SECOND_EMBEDDING (a second dense arm fused with the first by RRF "
        "into the dense list, as /search fuses it; every manual indexed by both)",
    )
    parser.add_argument(
        "--section-paths",
        choices=("both", "keyword", "dense", "off"),
        default=None,
        help="index the manuals with this RAG_SECTION_PATHS (default: the setting's default)",
    )
    parser.add_argument(
        "--skip-pronouns",
        action="store_true",
        help="BM25 without the question's pronouns: the same as --pronoun-weight 0",
    )
    parser.add_argument(
        "--pronoun-weight",
        type=float,
        default=None,
        help="ask with this RAG_KEYWORD_PRONOUN_WEIGHT (the share of its BM25 weight each of the "
        "question's pronouns keeps)",
    )
    args = parser.parse_args()
    missing = {s.name for s in missing_sources(ALL_SOURCES)}
    manuals = args.manuals or [m for m, s in ALL_SOURCES.items() if s.name not in missing]
    if not manuals:
        sys.exit("no manual installed (scripts/install.sh dev installs them)")
    families = [f for f in FAMILIES if f.name in args.families]
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(_env_file=None, data_dir=Path(data), env="development")
        if args.section_paths:
            settings = settings.model_copy(update={"section_paths": args.section_paths})
        if args.skip_pronouns:
            settings = settings.model_copy(update={"keyword_pronoun_weight": 0.0})
        if args.pronoun_weight is not None:
            settings = settings.model_copy(update={"keyword_pronoun_weight": args.pronoun_weight})
        if args.english_embedding:
            settings = settings.model_copy(update={"english_embedding": args.english_embedding})
        if args.second_embedding:
            settings = settings.model_copy(update={"second_embedding": args.second_embedding})
        config = RetrieverConfig.from_settings(settings)
        english = None
        if args.english_model:
            english = settings.model_copy(
                update={"embedding_provider": "huggingface", "embedding_model": args.english_model}
            )
        sets = asked_for(manuals, settings, args.refresh, english)
        coverage = section_coverage(manuals, settings)
        held = {}
        if args.held_out:
            names = [m for m, s in HELD_OUT_SOURCES.items() if s.path.is_file()]
            held = asked_for(names, settings, args.refresh, english)
    report = leave_one_out(sets, config, families, args.guard)
    for manual, row in report.items():
        row["n"] = len(sets[manual])
        if manual in coverage:
            row["section_coverage"] = coverage[manual]
    columns = ["keyword", "dense", "shipped", *[f.name for f in families]]
    mean = {
        c: {
            m: statistics.fmean(report[x][c][m] for x in report)
            for m in ("hit@1", "hit@5", "mrr@10")
        }
        for c in columns
    }
    worst = {c: min(report[x][c]["mrr@10"] for x in report) for c in columns}
    print_report({**report, "mean": {**mean, "n": sum(len(a) for a in sets.values())}}, columns)
    print("\nworst manual MRR@10: " + ", ".join(f"{c} {worst[c]:.3f}" for c in columns))
    if coverage:
        print(
            "\nchunks with a section path: "
            + ", ".join(
                f"{m} {c['with_path'] / max(c['chunks'], 1):.0%}" for m, c in coverage.items()
            )
        )
    verdicts = {c: verdict(report, c) for c in columns if c not in ("keyword", "dense")}
    for c, v in verdicts.items():
        print(
            f"{c}: {v['cells_under_arm']} cells under the better arm "
            f"({', '.join(v['under']) or 'none'}); largest MRR loss against shipped "
            f"{v['worst_vs_shipped']:+.3f} ({v['worst_vs_shipped_manual']})"
        )
    held_report = held_out(sets, held, config, families, args.guard) if held else {}
    if held_report:
        print("\nheld out (parameters chosen on every manual above):")
        print_report(held_report, columns)
    out: Path = args.out
    out.parent.mkdir(exist_ok=True)
    payload = {
        "held_out": held_report,
        "commit": git_commit(),
        "guard": args.guard,
        "manuals": report,
        "mean": mean,
        "worst_mrr": worst,
        "verdicts": verdicts,
    }
    out.write_text(json.dumps(payload, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
