"""Vocabulary bridges learned from the tenant's own corpus, measured leave-one-manual-out.

A natural question misses its page when it words a feature in everyday language and the manual
names it by its jargon. Three bridges (eval/corpus_terms.py: the corpus's `sentences` or outline
`titles` nearest to the question by the shipped embedder, or words that `cooccur` with the
question's rare words) offer terms of the manual's own; the keyword arm then scores the question
with those terms added at a share of their BM25 weight, and the shipped fusion, pinning, heading
and page-role rules order the result as /search does. A fourth (`sentence-dense`) adds no term:
the chunks holding the sentences nearest to the question are fused into the dense list. A gate
can keep the step to questions both arms are unsure of (the dense arm's best similarity, and the
keyword arm's selectivity, each under a threshold; no exact match pinned).

Each bridge's parameters (units read, terms added, their weight, the gate) are chosen on the
other development manuals when scoring one, and on all of them for R-intro, which never chooses
anything: by the best mean MRR@10 (each manual weighing the same), and again by the best mean
among the points that keep every training manual within 0.02 MRR@10 (`within-rule`). Reported
per manual: the shipped order alone and with each bridge, hit@1 / hit@5 / MRR@10, the mean and
the worst MRR change, the time the step adds per question, and (for reading only) how many grid
points would pass the keeping rule if chosen on all development manuals at once:

    python -m eval.corpus_bridge [--manuals R-admin xfig ...] [--held-out] [--data DIR]

Manuals are indexed once into `--data` (kept between runs); unit vectors and each manual's
per-question rankings are cached in `eval/.cache/`. Writes `eval/results/corpus-bridge.json`.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np

from app.config import load_settings
from app.container import Container
from app.domain import SECTION_SEPARATOR, Chunk
from app.retrieval.function_words import question_pronoun_weights
from app.retrieval.fusion import reciprocal_rank_fusion
from app.retrieval.hybrid import HybridRetriever, Recall
from eval.corpus_terms import (
    CooccurrenceBridge,
    CorpusWords,
    UnitBridge,
    section_terms,
    sections_of,
    sentence_terms,
    sentences_of,
)
from eval.manual_questions import (
    ALL_SOURCES,
    HELD_OUT_SOURCES,
    ManualQuestion,
    load_questions,
    missing_sources,
    resolve_gold,
)
from eval.metrics import ranking_scores
from eval.retrieval import RESULTS_DIR, git_commit
from eval.term_expansion import CACHE, indexed

METRICS = ("hit@1", "hit@5", "mrr@10")
MAX_LOSS = 0.02  # MRR@10 any manual may lose (the house rule)
SELECTIONS = ("mean", "within-rule")
TOP_K = 30  # chunks ranked per question, as eval/term_expansion.py reads them
TERM_BRIDGES = ("sentences", "titles", "cooccur")
# The fourth bridge adds no term: the chunks holding the sentences nearest to the question,
# best first, fused into the dense list by reciprocal rank at these weights (the dense arm's own
# list weighing 1), as the second dense arm's list is fused (RAG_SECOND_EMBEDDING).
SENTENCE_DENSE = "sentence-dense"
DENSE_WEIGHTS = (0.25, 0.5, 1.0)
DENSE_SENTENCES = 200  # nearest sentences read for that list
# Added after reading the four bridges above (R-intro included): the sentence and title
# bridges' terms kept only when one of the dense arm's first AGREED_DEPTH chunks holds them, so a
# term the nearest units bring from a neighbouring topic is dropped.
AGREED_BRIDGES = ("sentences-agreed", "titles-agreed")
AGREED_DEPTH = 10
BRIDGES = (*TERM_BRIDGES, *AGREED_BRIDGES, SENTENCE_DENSE)
# The grid. The first run (eval/results/corpus-bridge-first-grid.json) read 3 or 8 units, added
# 3 or 6 terms at 0.2, 0.4 or 0.7 and gated on the dense arm alone; most folds chose an edge of
# it (0.2; 8 units and 6 terms for titles), so it was widened at those edges and the keyword
# arm's selectivity joined the gate.
UNITS = (3, 8, 16)  # nearest units read (sentences, titles)
TERMS = (3, 6, 10)  # terms added
WEIGHTS = (0.1, 0.2, 0.4)  # share of its BM25 weight an added term keeps
# Gate thresholds, as quantiles over the development questions (None: no threshold): the step
# applies where the dense arm's best similarity is under the first and the keyword arm's
# selectivity (its first score over the question's idf mass) under the second.
GATE_QUANTILES = (None, 0.5, 0.25)
SELECTIVITY_QUANTILES = (None, 0.5)


@dataclass
class Tenant:
    """A manual's tenant with its bridges."""

    name: str
    units: dict[str, UnitBridge]
    cooccur: CooccurrenceBridge
    unit_counts: dict[str, int]
    sentence_vectors: np.ndarray
    sentence_chunks: list[list[str]]  # the chunks holding each sentence


def _embedded(container: Container, texts: list[str], label: str) -> np.ndarray:
    """Unit-length vectors of `texts` by the shipped embedder, cached on disk by content."""
    digest = hashlib.sha256(container.embedder.model_id.encode())
    for text in texts:
        digest.update(text.encode() + b"\0")
    path = CACHE / f"corpus-bridge-{label}-{digest.hexdigest()[:16]}.npy"
    if path.is_file():
        loaded: np.ndarray = np.load(path)
        return loaded
    vectors = np.asarray(container.embedder.embed_documents(texts), dtype=np.float32)
    vectors = vectors.reshape(len(texts), -1) if texts else np.zeros((0, 1), dtype=np.float32)
    np.save(path, vectors)
    return vectors


def prepared(container: Container, manual: str) -> Tenant:
    """The manual indexed (unless it is) and its three bridges built."""
    tenant = indexed(container, manual)
    chunks = [c for c in container.corpus.iter_chunks(tenant) if c.page_role is None]
    index = container.retriever.keyword_index
    words = CorpusWords(index.snapshot(tenant), index.tokenizer)
    sentences = sentences_of(chunks)
    sections = sections_of(chunks)
    titles = [path.replace(SECTION_SEPARATOR, ". ") for path in sections]
    sentence_vectors = _embedded(container, sentences, f"{manual}-sentences")
    title_vectors = _embedded(container, titles, f"{manual}-titles")
    holders = list(holding_chunks(chunks).values())
    assert len(holders) == len(sentences), "one list of holding chunks per sentence"
    return Tenant(
        tenant,
        {
            "sentences": UnitBridge(sentence_vectors, sentence_terms(sentences, words)),
            "titles": UnitBridge(title_vectors, section_terms(sections, words)),
        },
        CooccurrenceBridge.build(words),
        {"sentences": len(sentences), "titles": len(titles), "chunks": len(chunks)},
        sentence_vectors,
        holders,
    )


def holding_chunks(chunks: list[Chunk]) -> dict[str, list[str]]:
    """Sentence -> the ids of the chunks holding it, sentences in `sentences_of` order."""
    out: dict[str, list[str]] = {}
    for chunk in chunks:
        for sentence in sentences_of([chunk]):
            out.setdefault(sentence, []).append(chunk.id)
    return out


def dense_key(weight: float) -> str:
    """The grid key of the sentence-dense bridge at a weight."""
    return f"{SENTENCE_DENSE}/{DENSE_SENTENCES}/0/{weight}"


def with_dense_list(
    retriever: HybridRetriever,
    tenant: str,
    question: str,
    base: Recall,
    extra: list[tuple[str, float]],
    weight: float,
) -> Recall:
    """`base` with `extra` (chunk id, similarity; best first) fused into its dense list by
    reciprocal rank at `weight`, cut to the dense list's length; a chunk new to the list gets
    its sentence's similarity as its dense score."""
    recall = with_terms(retriever, tenant, question, base, [], 1.0)
    depth = len(base.dense_ids)
    fused = reciprocal_rank_fusion([base.dense_ids, [cid for cid, _ in extra]], [1.0, weight])
    ids = [cid for cid, _ in fused[:depth]]
    similarity = dict(extra)
    for candidate in recall.candidates.values():
        candidate.dense_rank = candidate.dense_score = None
    for rank, chunk_id in enumerate(ids, start=1):
        candidate = recall.candidate(chunk_id)
        seen = base.candidates.get(chunk_id)
        known = seen.dense_score if seen is not None else None
        candidate.dense_rank = rank
        candidate.dense_score = known if known is not None else similarity[chunk_id]
    recall.dense_ids = ids
    pinned = set(recall.pinned)
    for chunk_id in [
        c
        for c, cand in recall.candidates.items()
        if cand.dense_rank is None and cand.keyword_rank is None and c not in pinned
    ]:
        del recall.candidates[chunk_id]
    return recall


def asked_alone(
    retriever: HybridRetriever, tenant: str, question: str
) -> tuple[Recall, list[str], float]:
    """The question's recall, its pages in the shipped order, and the seconds that ordering took
    after the recall (what a bridge's own ordering is timed against)."""
    base = retriever.recall(tenant, question, "hybrid")
    started = time.perf_counter()
    alone = ranked_pages(
        retriever, tenant, question, with_terms(retriever, tenant, question, base, [], 1.0)
    )
    return base, alone, time.perf_counter() - started


def each_asked(
    retriever: HybridRetriever, tenant: str, questions: list[ManualQuestion]
) -> Iterator[tuple[ManualQuestion, Recall, list[float], list[str], float]]:
    """Each question with `asked_alone`'s recall, its vector, pages and seconds."""
    for question in questions:
        base, alone, seconds = asked_alone(retriever, tenant, question.text)
        assert base.query_vector is not None
        yield question, base, base.query_vector, alone, seconds


def sentence_dense_pages(
    container: Container, prepared_tenant: Tenant, questions: list[ManualQuestion]
) -> list[dict[str, Any]]:
    """Per question: the pages with the sentence list fused at each weight, and the time the
    step adds (the sentences' similarities, the fusion and the ranking, less the question's
    own ranking)."""
    retriever = container.retriever
    tenant = prepared_tenant.name
    depth = retriever.config.dense_candidates
    out = []
    for question, base, vector, _, base_seconds in each_asked(retriever, tenant, questions):
        pages, timing = {}, {}
        for weight in DENSE_WEIGHTS:
            started = time.perf_counter()
            vectors = prepared_tenant.sentence_vectors
            similarity = vectors @ np.asarray(vector, dtype=np.float32)
            extra: dict[str, float] = {}
            for i in np.argsort(-similarity)[:DENSE_SENTENCES].tolist():
                for chunk_id in prepared_tenant.sentence_chunks[i]:
                    extra.setdefault(chunk_id, float(similarity[i]))
            listed = list(extra.items())[:depth]
            recall = with_dense_list(retriever, tenant, question.text, base, listed, weight)
            pages[dense_key(weight)] = ranked_pages(retriever, tenant, question.text, recall)[:10]
            timing[dense_key(weight)] = time.perf_counter() - started - base_seconds
        terms: dict[str, list[str]] = {dense_key(0).rsplit("/", 1)[0]: []}  # it adds none
        out.append({"pages": pages, "added_seconds": timing, "terms": terms})
    return out


def with_terms(
    retriever: HybridRetriever,
    tenant: str,
    question: str,
    base: Recall,
    terms: Sequence[str],
    weight: float,
) -> Recall:
    """`base` (the question's recall) with its keyword arm asked again for the question plus
    `terms`, each term at `weight` of its BM25 weight; every other signal is the question's."""
    recall = Recall(
        coverage=base.coverage,
        cross_script=base.cross_script,
        specific_evidence_chunks=base.specific_evidence_chunks,
        content_match=base.content_match,
        pinned=list(base.pinned),
        exact_terms=list(base.exact_terms),
        best_similarity=base.best_similarity,
        query_vector=base.query_vector,
    )
    for chunk_id in base.dense_ids:
        seen = base.candidates[chunk_id]
        candidate = recall.candidate(chunk_id)
        candidate.chunk = seen.chunk
        candidate.dense_rank, candidate.dense_score = seen.dense_rank, seen.dense_score
    recall.dense_ids = list(base.dense_ids)
    config = retriever.config
    tokenizer = retriever.keyword_index.tokenizer
    tokens = tokenizer(question)
    weights = question_pronoun_weights(tokens, config.keyword_pronoun_weight)
    extra = [t for t in terms if t not in tokens]
    weights.update({t: weight for t in extra})
    snapshot = retriever.keyword_index.snapshot(tenant)
    hits = snapshot.search(tokens + extra, config.keyword_candidates, weights or None)
    for rank, (chunk_id, score) in enumerate(hits, start=1):
        candidate = recall.candidate(chunk_id)
        candidate.keyword_rank, candidate.keyword_score = rank, score
        recall.keyword_ids.append(chunk_id)
    for chunk_id in recall.pinned:
        candidate = recall.candidate(chunk_id)
        candidate.exact_match = True
        if chunk_id in base.candidates:
            candidate.chunk = candidate.chunk or base.candidates[chunk_id].chunk
    return recall


def ranked_pages(
    retriever: HybridRetriever, tenant: str, question: str, recall: Recall
) -> list[str]:
    """The question's pages in the shipped order (each once, from the first TOP_K chunks)."""
    window = TOP_K + retriever.config.page_role_shift
    ordered = retriever._ranked(tenant, question, recall, "hybrid", window)[:TOP_K]
    pages = [recall.candidates[cid].chunk for cid in ordered]
    return list(dict.fromkeys(str(chunk.page) for chunk in pages if chunk is not None))


Point = tuple[str, int, int, float]  # bridge, units, terms, weight


def keyword_selectivity(recall: Recall, tokens: list[str], words: CorpusWords) -> float:
    """The keyword arm's first score over the BM25 idf mass of the question's words the text
    holds: near 1 when its best chunk holds them all, low when it matched a few common ones."""
    mass = 0.0
    for token in dict.fromkeys(tokens):
        n = words.count(token)
        if n > 0:
            mass += math.log(1 + (words.chunks - n + 0.5) / (n + 0.5))
    if mass <= 0 or not recall.keyword_ids:
        return 1.0
    return float(recall.candidates[recall.keyword_ids[0]].keyword_score or 0.0) / mass


def question_rows(
    container: Container, prepared_tenant: Tenant, questions: list[ManualQuestion]
) -> list[dict[str, Any]]:
    """Per question: its gold pages, the dense arm's best similarity, whether an exact match was
    pinned, the pages alone and at every grid point, and the step's timings."""
    retriever = container.retriever
    tenant = prepared_tenant.name
    gold = resolve_gold(questions)
    tokenizer = retriever.keyword_index.tokenizer
    rows = []
    for question, base, vector, alone, base_seconds in each_asked(retriever, tenant, questions):
        tokens = tokenizer(question.text)
        selectivity = keyword_selectivity(base, tokens, prepared_tenant.cooccur.words)
        pages: dict[str, list[str]] = {}
        terms_of: dict[str, list[str]] = {}
        timing: dict[str, float] = {}
        for bridge, units, count in itertools.product(TERM_BRIDGES, UNITS, TERMS):
            if bridge == "cooccur" and units != UNITS[0]:
                continue
            started = time.perf_counter()
            if bridge == "cooccur":
                terms = prepared_tenant.cooccur.terms(tokens, count)
            else:
                terms = prepared_tenant.units[bridge].terms(vector, set(tokens), units, count)
            chosen = time.perf_counter() - started
            terms_of[f"{bridge}/{units}/{count}"] = terms
            found, spent = at_each_weight(
                retriever, tenant, question.text, base, terms, f"{bridge}/{units}/{count}"
            )
            pages.update(found)
            timing.update({key: chosen + t - base_seconds for key, t in spent.items()})
        rows.append(
            {
                "id": question.id,
                "gold": sorted(str(p) for p in gold[question.id]),
                "best_similarity": base.best_similarity,
                "pinned": bool(base.pinned),
                "keyword_selectivity": selectivity,
                "alone": alone[:10],
                "terms": terms_of,
                "pages": pages,
                "added_seconds": timing,
            }
        )
    return rows


def at_each_weight(
    retriever: HybridRetriever,
    tenant: str,
    question: str,
    base: Recall,
    terms: list[str],
    prefix: str,
) -> tuple[dict[str, list[str]], dict[str, float]]:
    """The first 10 pages with `terms` added at each of WEIGHTS, and the seconds each took
    (keyed `prefix/weight`)."""
    pages, seconds = {}, {}
    for weight in WEIGHTS:
        started = time.perf_counter()
        expanded = with_terms(retriever, tenant, question, base, terms, weight)
        pages[f"{prefix}/{weight}"] = ranked_pages(retriever, tenant, question, expanded)[:10]
        seconds[f"{prefix}/{weight}"] = time.perf_counter() - started
    return pages, seconds


def agreed_rows(
    container: Container, prepared_tenant: Tenant, questions: list[ManualQuestion]
) -> list[dict[str, Any]]:
    """Per question and grid point of the agreed bridges: the terms, the pages and the time the
    step adds (as `question_rows`)."""
    retriever = container.retriever
    tenant = prepared_tenant.name
    tokenizer = retriever.keyword_index.tokenizer
    out = []
    for question, base, vector, _, base_seconds in each_asked(retriever, tenant, questions):
        tokens = set(tokenizer(question.text))
        row: dict[str, dict[str, Any]] = {"pages": {}, "added_seconds": {}, "terms": {}}
        for bridge, units, count in itertools.product(AGREED_BRIDGES, UNITS, TERMS):
            started = time.perf_counter()
            held: set[str] = set()
            for chunk_id in base.dense_ids[:AGREED_DEPTH]:
                chunk = base.candidates[chunk_id].chunk
                held.update(tokenizer(chunk.text) if chunk is not None else [])
            source = prepared_tenant.units[bridge.removesuffix("-agreed")]
            offered = source.terms(vector, tokens, units, count=1000)  # every one
            terms = [t for t in offered if t in held][:count]
            chosen = time.perf_counter() - started
            row["terms"][f"{bridge}/{units}/{count}"] = terms
            found, spent = at_each_weight(
                retriever, tenant, question.text, base, terms, f"{bridge}/{units}/{count}"
            )
            row["pages"].update(found)
            row["added_seconds"].update({k: chosen + t - base_seconds for k, t in spent.items()})
        out.append(row)
    return out


RowsOf = Callable[[Container, Tenant, list[ManualQuestion]], list[dict[str, Any]]]


def cached_json(name: str, compute: Callable[[], Any]) -> Any:
    """`compute()`, kept in eval/.cache/corpus-bridge-NAME.json and read from there next time."""
    path = CACHE / f"corpus-bridge-{name}.json"
    if path.is_file():
        return json.loads(path.read_text())
    value = compute()
    path.write_text(json.dumps(value, ensure_ascii=False))
    return value


def cached_rows(
    container: Container, manual: str, questions: list[ManualQuestion]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`question_rows` and the tenant's unit counts, from the cache when the term sources, the
    grid and the questions are unchanged."""
    digest = hashlib.sha256(Path(__file__).with_name("corpus_terms.py").read_bytes())
    digest.update(repr((TERM_BRIDGES, UNITS, TERMS, WEIGHTS, TOP_K)).encode())
    for question in questions:
        digest.update(f"{question.id}\0{question.text}\0".encode())
    tenant = cache(partial(prepared, container, manual))

    def rows_and_counts() -> dict[str, Any]:
        rows = question_rows(container, tenant(), questions)
        return {"rows": rows, "tenant": {"units": tenant().unit_counts}}

    found = cached_json(f"rows-{manual}-{digest.hexdigest()[:16]}", rows_and_counts)
    rows, about = found["rows"], found["tenant"]
    # The later bridges' rankings, each cached apart (keyed by the grid before them too).
    for label, key, compute in (
        ("dense-v2", (DENSE_WEIGHTS, DENSE_SENTENCES), sentence_dense_pages),
        ("agreed", (AGREED_BRIDGES, AGREED_DEPTH), agreed_rows),
    ):
        digest.update(repr(key).encode())
        name = f"{label}-{manual}-{digest.hexdigest()[:16]}"

        def computed(compute: RowsOf = compute) -> list[dict[str, Any]]:
            return compute(container, tenant(), questions)

        extras = cached_json(name, computed)
        for row, extra in zip(rows, extras, strict=True):
            for field in ("pages", "added_seconds", "terms"):
                row[field].update(extra[field])
    return rows, about


Gate = tuple[float | None, float | None]  # dense similarity, keyword selectivity thresholds


def grid(thresholds: Sequence[Gate]) -> list[tuple[str, str, Gate]]:
    """(bridge, point key, gate thresholds) for every grid point."""
    out = []
    term_bridges = (*TERM_BRIDGES, *AGREED_BRIDGES)
    for bridge, units, count, weight in itertools.product(term_bridges, UNITS, TERMS, WEIGHTS):
        if bridge == "cooccur" and units != UNITS[0]:
            continue
        for threshold in thresholds:
            out.append((bridge, f"{bridge}/{units}/{count}/{weight}", threshold))
    for weight, threshold in itertools.product(DENSE_WEIGHTS, thresholds):
        out.append((SENTENCE_DENSE, dense_key(weight), threshold))
    return out


def gated_pages(row: dict[str, Any], key: str, gate: Gate) -> list[str]:
    """The bridged pages where the gate lets the step apply, else the question's own."""
    dense, keyword = gate
    unsure = (
        dense is None or ((row["best_similarity"] or 0.0) < dense and not row["pinned"])
    ) and (keyword is None or row["keyword_selectivity"] < keyword)
    pages: list[str] = row["pages"][key] if unsure else row["alone"]
    return pages


def means(
    rows: list[dict[str, Any]], order: Callable[[dict[str, Any]], list[str]]
) -> dict[str, float]:
    """Mean hit@1 / hit@5 / MRR@10 of an ordering over a manual's questions."""
    scored = [ranking_scores(order(row), set(row["gold"])) for row in rows]
    return {m: statistics.fmean(s[m] for s in scored) for m in METRICS}


def leave_one_out(
    rows: dict[str, list[dict[str, Any]]],
    development: list[str],
    thresholds: Sequence[Gate],
    selection: str = "mean",
) -> dict[str, dict[str, Any]]:
    """Per manual and bridge: the grid point chosen on the other development manuals (all of
    them for a held-out manual) and its scores there; and the question alone. `selection`:
    "mean", the best mean MRR@10 over them; "within-rule", the best of the points that keep
    each of them within MAX_LOSS of its MRR@10 alone (the keeping rule applied to the training
    manuals), else the best mean."""
    points = grid(thresholds)
    table = {
        (key, threshold): {
            manual: means(qs, partial(gated_pages, key=key, gate=threshold))
            for manual, qs in rows.items()
        }
        for _, key, threshold in points
    }
    report: dict[str, dict[str, Any]] = {}
    for manual, qs in rows.items():
        train = [m for m in development if m != manual]
        row: dict[str, Any] = {"n": len(qs), "alone": means(qs, lambda r: r["alone"])}
        alone = {m: means(rows[m], lambda r: r["alone"])["mrr@10"] for m in train}

        def merit(
            point: tuple[str, Gate], train: list[str] = train, alone: dict[str, float] = alone
        ) -> tuple[bool, float]:
            scores = {m: table[point][m]["mrr@10"] for m in train}
            within = all(scores[m] - alone[m] >= -MAX_LOSS for m in train)
            return (within or selection == "mean", statistics.fmean(scores.values()))

        for bridge in BRIDGES:
            mine = [(k, t) for b, k, t in points if b == bridge]
            best = max(mine, key=merit)
            row[bridge] = {**table[best][manual], "point": best[0], "gate": best[1]}
        report[manual] = row
    return report


def print_table(report: dict[str, dict[str, Any]], development: list[str]) -> dict[str, Any]:
    """The per-manual table; returns each bridge's development mean and worst MRR change."""
    print("| manual | n | alone | " + " | ".join(BRIDGES) + " |")
    print("|---|---|---|" + "---|" * len(BRIDGES))

    def cell(scores: dict[str, float]) -> str:
        return " / ".join(f"{scores[m]:.3f}" for m in METRICS)

    for manual, row in report.items():
        cells = [
            f"{cell(row[b])} ({row[b]['mrr@10'] - row['alone']['mrr@10']:+.3f})" for b in BRIDGES
        ]
        held = " (held out)" if manual in HELD_OUT_SOURCES else ""
        print(f"| {manual}{held} | {row['n']} | {cell(row['alone'])} | " + " | ".join(cells) + " |")
    summary: dict[str, Any] = {}
    for column in ("alone", *BRIDGES):
        mean = {m: statistics.fmean(report[d][column][m] for d in development) for m in METRICS}
        changes = {
            d: report[d][column]["mrr@10"] - report[d]["alone"]["mrr@10"] for d in development
        }
        worst = min(changes, key=changes.__getitem__)
        losers = sorted(d for d, c in changes.items() if c < -0.02)
        summary[column] = {
            "mean": mean,
            "worst_change": changes[worst],
            "worst_manual": worst,
            "losing_over_0.02": losers,
        }
        print(
            f"{column}: development mean {cell(mean)}; worst MRR change {changes[worst]:+.3f} "
            f"({worst}); losing more than 0.02: {', '.join(losers) or 'none'}"
        )
    return summary


def added_latency(rows: dict[str, list[dict[str, Any]]], report: dict[str, Any]) -> dict[str, Any]:
    """Per bridge: the added seconds per question at the point each manual was scored with
    (median and p95 over every question, gated or not)."""
    out = {}
    for bridge in BRIDGES:
        added = [
            row["added_seconds"][report[manual][bridge]["point"]]
            for manual, qs in rows.items()
            for row in qs
        ]
        ordered = sorted(added)
        out[bridge] = {
            "median_ms": 1000 * statistics.median(ordered),
            "p95_ms": 1000 * ordered[int(0.95 * (len(ordered) - 1))],
        }
        added_ms = out[bridge]
        print(f"{bridge}: adds {added_ms['median_ms']:.1f} ms median, {added_ms['p95_ms']:.1f} p95")
    return out


def chosen_rows(
    rows: dict[str, list[dict[str, Any]]], report: dict[str, dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """Each question with, per bridge, only the terms of the point its manual was scored with
    and its pages there when the gate let the step apply (the results file stays small)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for manual, questions in rows.items():
        out[manual] = []
        for row in questions:
            kept = {k: row[k] for k in ("id", "gold", "best_similarity", "pinned", "alone")}
            kept["keyword_selectivity"] = row.get("keyword_selectivity")
            for bridge in BRIDGES:
                point, gate = report[manual][bridge]["point"], report[manual][bridge]["gate"]
                applied = gated_pages(row, point, tuple(gate)) is not row["alone"]
                kept[bridge] = {
                    "terms": row["terms"][point.rsplit("/", 1)[0]],
                    "pages": row["pages"][point] if applied else None,  # None: the gate shut
                }
            out[manual].append(kept)
    return out


def in_sample(
    rows: dict[str, list[dict[str, Any]]], development: list[str], thresholds: Sequence[Gate]
) -> dict[str, Any]:
    """Per bridge, chosen on all development manuals at once (no held-out check, for reading
    only): how many grid points raise the mean MRR@10 with no manual losing more than MAX_LOSS,
    and the best of them."""
    alone = {m: means(rows[m], lambda r: r["alone"])["mrr@10"] for m in development}
    base = statistics.fmean(alone.values())
    out: dict[str, Any] = {}
    for bridge in BRIDGES:
        passing = []
        points = [(k, t) for b, k, t in grid(thresholds) if b == bridge]
        for key, gate in points:
            order = partial(gated_pages, key=key, gate=gate)
            change = {m: means(rows[m], order)["mrr@10"] - alone[m] for m in development}
            mean = statistics.fmean(alone[m] + change[m] for m in development) - base
            if mean > 0 and min(change.values()) >= -MAX_LOSS:
                passing.append((mean, min(change.values()), key, gate))
        top = max(passing, key=lambda p: (p[0], p[1]), default=None)
        best = (
            None
            if top is None
            else dict(zip(("mean_change", "worst_change", "point", "gate"), top, strict=True))
        )
        out[bridge] = {"points": len(points), "passing": len(passing), "best_passing": best}
        print(f"in sample, {bridge}: {len(passing)} of {len(points)} points pass; best {best}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--manuals", nargs="*", default=None, help="default: every installed one")
    parser.add_argument("--held-out", action="store_true", help="also R-intro (chooses nothing)")
    parser.add_argument("--data", type=Path, default=CACHE / "corpus-bridge-data")
    args = parser.parse_args()
    absent = {s.name for s in missing_sources(ALL_SOURCES)}
    development = args.manuals or [m for m, s in ALL_SOURCES.items() if s.name not in absent]
    manuals = development + (list(HELD_OUT_SOURCES) if args.held_out else [])
    CACHE.mkdir(exist_ok=True)
    container = Container(load_settings(_env_file=None, data_dir=args.data, env="development"))
    questions = load_questions(sources={**ALL_SOURCES, **HELD_OUT_SOURCES})
    rows: dict[str, list[dict[str, Any]]] = {}
    tenants: dict[str, dict[str, Any]] = {}
    for manual in manuals:
        started = time.perf_counter()
        mine = [q for q in questions if q.manual == manual]
        rows[manual], about = cached_rows(container, manual, mine)
        tenants[manual] = {"units": about["units"]}
        seconds = time.perf_counter() - started
        print(f"{manual}: {tenants[manual]['units']}, {seconds:.0f} s", flush=True)
    similarities = [r["best_similarity"] or 0.0 for d in development for r in rows[d]]
    selectivities = [r["keyword_selectivity"] for d in development for r in rows[d]]
    dense = [None if q is None else float(np.quantile(similarities, q)) for q in GATE_QUANTILES]
    keyword = [
        None if q is None else float(np.quantile(selectivities, q)) for q in SELECTIVITY_QUANTILES
    ]
    thresholds = list(itertools.product(dense, keyword))
    selections = {}
    for selection in SELECTIONS:
        print(f"\nparameters chosen by {selection} on the other manuals:")
        report = leave_one_out(rows, development, thresholds, selection)
        selections[selection] = {
            "manuals": report,
            "summary": print_table(report, development),
            "added_latency": added_latency(rows, report),
        }
    # Each question's terms and pages, at the points the first selection (by mean) chose.
    selections[SELECTIONS[0]]["questions"] = chosen_rows(rows, selections[SELECTIONS[0]]["manuals"])
    out = RESULTS_DIR / "corpus-bridge.json"
    payload = {
        "commit": git_commit(),
        "grid": {
            "units": UNITS,
            "terms": TERMS,
            "weights": WEIGHTS,
            "dense_weights": DENSE_WEIGHTS,
            "gate_thresholds": thresholds,
        },
        "selections": selections,
        "in_sample": in_sample(rows, development, thresholds),
        "tenants": tenants,
    }
    out.write_text(json.dumps(payload, ensure_ascii=False) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
