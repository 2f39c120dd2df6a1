"""Hybrid retrieval: dense + BM25 fused (by rank or by standardised score), exact matches
pinned, optional cross-encoder.

`search(tenant, query, k, mode)` is the one entry point. Modes let the eval harness compare
configurations on the same objects: "dense", "keyword", "hybrid", "rerank" (hybrid + reranker).

Stages, timed by the orchestrator: `recall` (the arms: embed_query, dense, keyword with exact
matches) fills a `Recall` of typed `Candidate`s; `fuse` orders them (a pure function, which the
tuner in eval/tune_fusion.py calls directly); the head is materialised from the store, optionally
reranked, content chunks holding the query as a heading line move up (`promote_headings`), and
pages with a role (contents, index, ...) are demoted (`demote_page_roles`).

Keyword freshness relies on the corpus-version check inside `KeywordIndex` (any write through
the store, in any process, bumps the version); the ingest path may call `refresh(tenant)` after a
document changes to pay the rebuild then rather than on the next query, but does not have to.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Literal, get_args

from app.config import FusionMethod
from app.domain import Chunk, RetrievalResult, SearchHit
from app.retrieval.evidence import specific_evidence_chunks
from app.retrieval.exact_match import MAX_EXACT_CHUNKS, ExactLimits, ExactMatch, find_exact
from app.retrieval.extra_dense import ExtraDense, extra_dense_hits
from app.retrieval.function_words import (
    content_tokens,
    matches_content_word,
    question_pronoun_weights,
)
from app.retrieval.fusion import (
    reciprocal_rank_fusion,
    reserve_places,
    standardised_score_fusion,
)
from app.retrieval.gate import judge, threshold_for
from app.retrieval.grouping import (
    GROUPINGS,
    MAX_POOL_FACTOR,
    POOL_GROWTH,
    Grouping,
    group_by_document,
)
from app.retrieval.headings import has_heading
from app.retrieval.keyword import KeywordIndex
from app.retrieval.scope import EVERYTHING, ScopedReads, SearchScope
from app.text.language import is_english_question
from app.timing import timed

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.config import Settings
    from app.providers.types import Embedder, Reranker
    from app.retrieval.corpus_reader import CorpusReader

logger = logging.getLogger(__name__)

# The fusion values that replace the configured ones when the English arm ranked the dense list
# (RAG_ENGLISH_EMBEDDING), per model, measured leave-one-manual-out (eval/manuals_loo.py
# --english-embedding, family `english`). For minilm none: the values its folds chose (rank-order
# dense weight 1.0, score weight 1, one reserved place) lost up to 0.049 MRR on keyword-led
# manuals (docs/log/evaluation.md, 2026-12-06), so it ranks with the configured ones.
ENGLISH_FUSION: dict[str, tuple[tuple[str, float | int], ...]] = {
    "none": (),
    "minilm": (),
}

RetrievalMode = Literal["dense", "keyword", "hybrid", "rerank"]
RETRIEVAL_MODES: tuple[str, ...] = get_args(RetrievalMode)


@dataclass(frozen=True)
class RetrieverConfig:
    """Plain values the retriever needs (`from_settings` reads them from Settings)."""

    dense_candidates: int = 30
    keyword_candidates: int = 30
    rrf_k: int = 60
    dense_weight: float = 1.0
    keyword_weight: float = 1.0
    max_k: int = 50
    relevance_threshold: float | None = None
    reranker_max_candidates: int = 20
    reranker_max_chars: int = 1200
    exact: ExactLimits = field(default_factory=ExactLimits)
    # The keyword arm's weight is scaled by coverage ** this (share of query terms the tenant's
    # text contains); 0 switches the scaling off.
    keyword_coverage_power: float = 1.0
    # A cross-script query (most of its words in a script the tenant's text lacks: an Arabic
    # question over English documents) is fused flatter, with this k and dense weight and the
    # keyword arm unscaled: its few matches are the Latin names and numbers it contains, a
    # precise signal that coverage scaling would switch off. 0 turns the rule off.
    cross_script_rrf_k: int = 0
    cross_script_dense_weight: float = 1.0
    # When at most this many chunks hold all of the query's numbers and other-script words
    # (app/retrieval/evidence.py), the keyword arm weighs at least as much as the dense arm,
    # whatever the coverage: a year or a Latin name found in one paragraph of English text is
    # meant, even in an Arabic question. 0 turns the rule off.
    specific_evidence_max_chunks: int = 0
    # The keyword arm takes part only when the query matched a number or a content word of the
    # tenant's text in the query's own script that at most half of its chunks hold: a question
    # whose only matches are function words, other-script words (the Arabic "ﷺ" expands to,
    # inside an English question) or words most chunks hold (that Arabic, inside English
    # hadiths, matched by an Arabic question), or none,
    # is ranked by the dense arm, unless the specific-evidence rule above applies
    # (app/retrieval/function_words.py).
    keyword_gate: bool = False
    # The embedder centres questions (RAG_USE_QUESTION_CENTRING): the relevance threshold
    # calibrated for centred questions applies.
    centred_questions: bool = False
    # Places a contents / index / list / bibliography / blank / cover page yields to content
    # pages in the final order (0: no demotion).
    page_role_shift: int = 0
    # Content chunks with a line that reads as the query (a section heading) go first, after
    # exact matches (app/retrieval/headings.py).
    promote_headings: bool = True
    # A search scope of at most this many chunks is searched exactly by the dense arm (every
    # vector of the scope compared), above it through the index's metadata filter.
    exact_scope_chunks: int = 20_000
    # "rrf": weighted Reciprocal Rank Fusion (rrf_k, dense_weight, keyword_weight); "scores":
    # each arm's scores standardised over its own list and summed with score_dense_weight and
    # keyword_weight (cross-script questions still by rank). The per-query keyword weight
    # (coverage, gate, specific evidence) applies to both.
    fusion: FusionMethod = "rrf"
    score_dense_weight: float = 1.0
    # The least standard deviation each arm's scores are divided by under "scores" (dense: in
    # similarity units, keyword: in BM25 units), so a flat list is not stretched.
    score_dense_spread: float = 0.0
    score_keyword_spread: float = 0.0
    # "blend": the rank order and the score order fused again by RRF with this k, the score
    # order weighing `blend_score_weight` against the rank order's 1.
    blend_rrf_k: int = 60
    blend_score_weight: float = 2.0
    # Chunks holding an exact match of a quoted phrase or code-like term go first (`pinned`).
    pin_exact_matches: bool = True
    # The first `reserve_within` places after the exact matches hold the dense arm's first
    # `reserve_dense_first` and the keyword arm's first `reserve_keyword_first` candidates (the
    # keyword arm's only when fusion counted it: not gated off, not a cross-script question),
    # so neither arm's best can be buried by the other (`fusion.reserve_places`). 0: off.
    reserve_dense_first: int = 0
    reserve_keyword_first: int = 0
    reserve_within: int = 0
    # The dense arm's very first candidate is kept inside this many places (0: off), a tighter
    # bound than `reserve_within` gives it.
    reserve_dense_top_within: int = 0
    # The share of its BM25 weight each first- and second-person pronoun of the query keeps
    # ("How do I ...", "my data"; app/retrieval/function_words.py): 1 scores them like any
    # word, 0 leaves them out.
    keyword_pronoun_weight: float = 1.0
    # Fusion values used instead of these when the English arm ranked the dense list
    # (`ENGLISH_FUSION` of RAG_ENGLISH_EMBEDDING): (field name, value) pairs.
    english_fusion: tuple[tuple[str, float | int], ...] = ()

    def for_recall(self, recall: Recall) -> RetrieverConfig:
        """The values fusion uses for this recall: with the English arm's overrides when it
        ranked the dense list."""
        if recall.english_dense and self.english_fusion:
            return replace(self, **dict(self.english_fusion))  # type: ignore[arg-type]
        return self

    @classmethod
    def from_settings(cls, settings: Settings) -> RetrieverConfig:
        """The retrieval values of a Settings object."""
        return cls(
            dense_candidates=settings.dense_candidates,
            keyword_candidates=settings.keyword_candidates,
            rrf_k=settings.rrf_k,
            dense_weight=settings.dense_weight,
            keyword_weight=settings.keyword_weight,
            max_k=settings.max_k,
            relevance_threshold=settings.relevance_threshold,
            reranker_max_candidates=settings.reranker_max_candidates,
            reranker_max_chars=settings.reranker_max_chars,
            exact=ExactLimits.from_settings(settings),
            keyword_coverage_power=settings.keyword_coverage_power,
            cross_script_rrf_k=settings.cross_script_rrf_k,
            cross_script_dense_weight=settings.cross_script_dense_weight,
            specific_evidence_max_chunks=settings.specific_evidence_max_chunks,
            keyword_gate=settings.keyword_gate,
            centred_questions=settings.embedding_provider == "use"
            and settings.use_question_centring,
            page_role_shift=settings.page_role_shift,
            exact_scope_chunks=settings.exact_scope_chunks,
            fusion=settings.fusion,
            score_dense_weight=settings.score_dense_weight,
            score_dense_spread=settings.score_dense_spread,
            score_keyword_spread=settings.score_keyword_spread,
            blend_rrf_k=settings.blend_rrf_k,
            blend_score_weight=settings.blend_score_weight,
            reserve_dense_first=settings.reserve_dense_first,
            reserve_keyword_first=settings.reserve_keyword_first,
            reserve_within=settings.reserve_within,
            reserve_dense_top_within=settings.reserve_dense_top_within,
            keyword_pronoun_weight=settings.keyword_pronoun_weight,
            english_fusion=ENGLISH_FUSION[settings.english_embedding],
        )


@dataclass
class Candidate:
    """One chunk on its way through the stages, with the evidence each stage left on it."""

    chunk_id: str
    chunk: Chunk | None = None
    dense_rank: int | None = None
    dense_score: float | None = None
    second_dense_rank: int | None = None  # the second dense arm's (RAG_SECOND_EMBEDDING)
    second_dense_score: float | None = None
    english_dense_rank: int | None = None  # the English arm's (RAG_ENGLISH_EMBEDDING)
    english_dense_score: float | None = None
    keyword_rank: int | None = None
    keyword_score: float | None = None
    fused_score: float | None = None
    rerank_score: float | None = None
    exact_match: bool = False
    # The place fusion gave it, and the rules that moved it since (explained by /search).
    fused_rank: int | None = None
    rules: list[str] = field(default_factory=list)

    def evidence(self) -> dict[str, float | int | None]:
        """The per-stage evidence as /search shows it (`stages`)."""
        return {
            "dense_rank": self.dense_rank,
            "dense_score": self.dense_score,
            "second_dense_rank": self.second_dense_rank,
            "second_dense_score": self.second_dense_score,
            "english_dense_rank": self.english_dense_rank,
            "english_dense_score": self.english_dense_score,
            "keyword_rank": self.keyword_rank,
            "keyword_score": self.keyword_score,
            "fused_score": self.fused_score,
            "rerank_score": self.rerank_score,
            "exact_match": int(self.exact_match),
        }

    def score_for(self, mode: RetrievalMode) -> float:
        """The score a hit shows in this mode (the fused score beyond the reranker's cap)."""
        score = {
            "dense": self.dense_score,
            "keyword": self.keyword_score,
            "hybrid": self.fused_score,
            "rerank": self.rerank_score,
        }[mode]
        if score is None:
            score = self.fused_score
        return float(score or 0.0)


@dataclass(frozen=True)
class FusionRecord:
    """The values fusion actually used for one query, and the query-level rules that set them
    (the explanation reads these, so it stays true to whatever the fusion does)."""

    mode: str
    dense_weight: float | None = None
    keyword_weight: float | None = None
    rrf_k: int | None = None
    rules: tuple[str, ...] = ()
    # "rrf" (reciprocal rank fusion), "scores" (standardised scores) or "blend" (both, fused)
    method: str = "rrf"


@dataclass
class Recall:
    """What the arms found for one query: the input of fusion (kept whole for the tuner)."""

    candidates: dict[str, Candidate] = field(default_factory=dict)
    dense_ids: list[str] = field(default_factory=list)
    keyword_ids: list[str] = field(default_factory=list)
    coverage: float = 0.0
    cross_script: bool = False
    # Chunks holding all of the query's script-neutral tokens (numbers, other-script words).
    specific_evidence_chunks: int = 0
    # The query matched at least one content word of the tenant's text (`keyword_gate`).
    content_match: bool = True
    pinned: list[str] = field(default_factory=list)
    exact_terms: list[str] = field(default_factory=list)
    best_similarity: float | None = None
    query_vector: list[float] | None = None
    # The English arm ranked the dense list (an English question, RAG_ENGLISH_EMBEDDING).
    english_dense: bool = False
    fusion: FusionRecord | None = None  # what `fuse` did, for /search's explanation

    def candidate(self, chunk_id: str) -> Candidate:
        """The candidate for this id, created on first sight."""
        found = self.candidates.get(chunk_id)
        if found is None:
            found = self.candidates[chunk_id] = Candidate(chunk_id)
        return found


def fuse(recall: Recall, mode: RetrievalMode, config: RetrieverConfig) -> list[str]:
    """Candidate ids in fused order, exact matches first; records each fused score."""
    if mode == "dense":
        ordered = list(recall.dense_ids)
        recall.fusion = FusionRecord(mode)
    elif mode == "keyword":
        ordered = list(recall.keyword_ids)
        recall.fusion = FusionRecord(mode)
    else:
        config = config.for_recall(recall)
        fused = _fused(recall, config)  # records the weights and rules in recall.fusion
        if recall.english_dense and recall.fusion is not None:  # the dense list's own rule
            recall.fusion = replace(recall.fusion, rules=(*recall.fusion.rules, "english_arm"))
        for chunk_id, score in fused:
            recall.candidates[chunk_id].fused_score = score
        ordered = [cid for cid, _ in fused]
        # Pinned exact matches seen by neither arm still need a place (after the fused ones).
        seen = set(ordered)
        ordered += [cid for cid in recall.candidates if cid not in seen]
    # Exact matches go first (in fused order among themselves): the user meant them.
    pinned = set(recall.pinned)
    rest = [i for i in ordered if i not in pinned]
    if mode not in ("dense", "keyword"):
        rest = _reserve_arm_firsts(rest, recall, config)
    final = [i for i in ordered if i in pinned] + rest
    for rank, chunk_id in enumerate(ordered, start=1):
        candidate = recall.candidates[chunk_id]
        candidate.fused_rank = rank
        if chunk_id in pinned:
            candidate.rules.append("exact_match")
    return final


def _reserve_arm_firsts(rest: list[str], recall: Recall, config: RetrieverConfig) -> list[str]:
    """The fused order (exact matches set aside) with each arm's first candidates inside the
    first `reserve_within` places, and the dense arm's very first inside the first
    `reserve_dense_top_within`; those it moved up record the rule."""
    wanted = recall.dense_ids[: config.reserve_dense_first]
    record = recall.fusion
    keyword_counted = record is not None and bool(record.keyword_weight)
    if keyword_counted and not recall.cross_script:
        wanted = [*wanted, *recall.keyword_ids[: config.reserve_keyword_first]]
    reserved = _reserved(rest, recall, wanted, config.reserve_within)
    return _reserved(reserved, recall, recall.dense_ids[:1], config.reserve_dense_top_within)


def _reserved(ordered: list[str], recall: Recall, wanted: list[str], within: int) -> list[str]:
    """`ordered` with `wanted` inside its first `within` places (`fusion.reserve_places`; 0:
    unchanged); those it moved up record the rule."""
    if within <= 0 or not wanted:
        return ordered
    reserved = reserve_places(ordered, wanted, within)
    before = {cid: i for i, cid in enumerate(ordered)}
    for i, cid in enumerate(reserved[:within]):
        rules = recall.candidates[cid].rules
        if before[cid] > i and cid in wanted and "arm_first_reserved" not in rules:
            rules.append("arm_first_reserved")
    return reserved


def _fused(recall: Recall, config: RetrieverConfig) -> list[tuple[str, float]]:
    """Both arms fused with this query's weights (best first, with the fused score)."""
    if config.fusion == "blend" and not recall.cross_script:
        # Rank fusion of the two fusions: score fusion leads, and where it alone would bury
        # what rank fusion ranks high (a manual whose keyword arm is the better one), the rank
        # order holds it up (eval/manuals_loo.py).
        by_rank = _fused(recall, replace(config, fusion="rrf"))
        by_score = _fused(recall, replace(config, fusion="scores"))
        assert recall.fusion is not None  # set by the score fusion just above
        recall.fusion = replace(recall.fusion, method="blend", rrf_k=config.blend_rrf_k)
        return reciprocal_rank_fusion(
            [[cid for cid, _ in by_rank], [cid for cid, _ in by_score]],
            [1.0, config.blend_score_weight],
            config.blend_rrf_k,
        )
    # The keyword arm speaks for the query terms the tenant's text contains: an Arabic
    # question over English documents matches almost nothing, and its few accidental
    # matches must not outvote the dense arm (measured on XQuAD ar->en).
    # Score fusion is for questions in the script of the tenant's text: a cross-script
    # question's few keyword matches (names, numbers) are fused by rank, as measured on XQuAD
    # ar->en and en->ar, where standardised scores let them outvote the dense arm.
    scored = config.fusion == "scores" and not recall.cross_script
    dense_weight = config.score_dense_weight if scored else config.dense_weight
    rrf_k = config.rrf_k
    rules: list[str] = []
    keyword_weight = config.keyword_weight * recall.coverage**config.keyword_coverage_power
    if keyword_weight < config.keyword_weight:
        rules.append("keyword_coverage_scaling")
    specific = 0 < recall.specific_evidence_chunks <= config.specific_evidence_max_chunks
    # Unless the match is specific: a number or other-script word few chunks hold is meant.
    if specific:
        keyword_weight = max(keyword_weight, dense_weight)
        rules.append("specific_evidence")
    elif config.keyword_gate and not recall.content_match:
        keyword_weight = 0.0
        rules.append("keyword_gate")
    if recall.cross_script and config.cross_script_rrf_k > 0:
        dense_weight, rrf_k = config.cross_script_dense_weight, config.cross_script_rrf_k
        keyword_weight = config.keyword_weight
        rules.append("cross_script")
    method = "scores" if scored else "rrf"
    recall.fusion = FusionRecord(
        "hybrid", dense_weight, keyword_weight, rrf_k if not scored else None, tuple(rules), method
    )
    if scored:
        candidates = recall.candidates
        dense = [(cid, float(candidates[cid].dense_score or 0.0)) for cid in recall.dense_ids]
        keyword = [(cid, float(candidates[cid].keyword_score or 0.0)) for cid in recall.keyword_ids]
        return standardised_score_fusion(
            [dense, keyword],
            [dense_weight, keyword_weight],
            [config.score_dense_spread, config.score_keyword_spread],
        )
    return reciprocal_rank_fusion(
        [recall.dense_ids, recall.keyword_ids], [dense_weight, keyword_weight], rrf_k
    )


def promote_headings(ordered: list[str], recall: Recall, query: str) -> list[str]:
    """Loaded content chunks holding the query as a heading line move ahead of the rest, after
    the exact matches; each group keeps its order."""
    pinned = set(recall.pinned)

    def heading(cid: str) -> bool:
        chunk = recall.candidates[cid].chunk
        return cid not in pinned and chunk is not None and has_heading(chunk, query)

    matched = [cid for cid in ordered if heading(cid)]
    if not matched:
        return ordered
    for cid in matched:
        recall.candidates[cid].rules.append("heading_promoted")
    moved = pinned | set(matched)
    return [c for c in ordered if c in pinned] + matched + [c for c in ordered if c not in moved]


def demote_page_roles(ordered: list[str], recall: Recall, shift: int) -> list[str]:
    """Move pages with a role (contents, index, ...) `shift` places down, content first on ties;
    exact matches stay ahead of the rest. Ids whose chunk is not loaded keep their place."""
    if shift <= 0:
        return ordered
    pinned = set(recall.pinned)

    def key(item: tuple[int, str]) -> tuple[int, int, int]:
        position, cid = item
        chunk = recall.candidates[cid].chunk
        demoted = chunk is not None and chunk.page_role is not None
        return (0 if cid in pinned else 1, position + (shift if demoted else 0), int(demoted))

    for cid in ordered:
        chunk = recall.candidates[cid].chunk
        if chunk is not None and chunk.page_role is not None:
            recall.candidates[cid].rules.append(f"page_role_demoted:{chunk.page_role}")
    return [cid for _, cid in sorted(enumerate(ordered), key=key)]


class HybridRetriever:
    """Finds a tenant's chunks for a question; see the module docstring."""

    def __init__(
        self,
        embedder: Embedder,
        store: CorpusReader,
        keyword_index: KeywordIndex,
        config: RetrieverConfig,
        reranker: Reranker | None = None,
        second: ExtraDense | None = None,
        english: ExtraDense | None = None,
    ) -> None:
        self.embedder = embedder
        self.second = second  # the second dense arm (RAG_SECOND_EMBEDDING), if any
        self.english = english  # the English arm (RAG_ENGLISH_EMBEDDING), if any
        self.store = store
        self.keyword_index = keyword_index
        self.config = config
        self.reranker = reranker
        self.threshold = threshold_for(
            embedder.model_id, config.relevance_threshold, config.centred_questions
        )
        self.scoped = ScopedReads(store, config.exact_scope_chunks)

    @property
    def default_mode(self) -> RetrievalMode:
        """Hybrid plus reranking when a reranker is configured, else hybrid."""
        return "rerank" if self.reranker is not None else "hybrid"

    def refresh(self, tenant_id: str) -> None:
        """Rebuild the tenant's keyword index now if its documents changed (optional)."""
        self.keyword_index.refresh(tenant_id)

    def search(
        self,
        tenant_id: str,
        query: str,
        k: int,
        mode: RetrievalMode | None = None,
        group: Grouping = "chunk",
        scope: SearchScope = EVERYTHING,
    ) -> RetrievalResult:
        """The k best chunks of the tenant for `query` (grouped by document: the best chunk of
        each of the k best documents), with per-stage evidence and a verdict. Only chunks
        inside `scope` are searched (app/retrieval/scope.py): an empty scope finds nothing."""
        mode = self._checked_mode(mode, k)
        if group not in GROUPINGS:
            raise ValueError(f"unknown grouping {group!r}; expected one of {GROUPINGS}")
        k = min(k, self.config.max_k)
        if not query.strip():
            return RetrievalResult([], False, "empty question")
        if scope.empty:
            return RetrievalResult([], False, "nothing in the search scope")

        if group == "document":
            recall, hits = self._document_hits(tenant_id, query, k, mode, scope)
        else:
            recall = self.recall(tenant_id, query, mode, scope=scope)
            # Demoted pages may free places for up to `page_role_shift` more chunks.
            ordered = self._ranked(tenant_id, query, recall, mode, k + self.config.page_role_shift)
            hits = [self._hit(recall.candidates[i], mode) for i in ordered[:k]]
        decision = judge(
            recall.best_similarity, self.threshold, recall.exact_terms, has_candidates=bool(hits)
        )
        # Plain references (no copies): /search turns them into JSON only when asked to explain.
        explain = {
            "fusion": recall.fusion or FusionRecord(mode),
            "gate": {
                "relevant": decision.relevant,
                "reason": decision.reason,
                "threshold": self.threshold,
                "best_similarity": recall.best_similarity,
            },
            "exact_terms": recall.exact_terms,
        }
        return RetrievalResult(hits, decision.relevant, decision.reason, explain)

    def recall(
        self,
        tenant_id: str,
        query: str,
        mode: RetrievalMode,
        pool_factor: int = 1,
        vector: list[float] | None = None,
        scope: SearchScope = EVERYTHING,
    ) -> Recall:
        """Run the arms the mode needs (timed per stage), each taking `pool_factor` times its
        configured candidates, inside `scope`; the input of `fuse`. `vector`: the query's, when
        known."""
        recall = Recall()
        if mode != "keyword":
            if vector is None:
                with timed("embed_query"):
                    vector = self.embedder.embed_query(query)
            recall.query_vector = vector
            with timed("dense"):
                self._dense_arm(tenant_id, vector, recall, pool_factor, scope)
            # The further dense arms search inside the scope as the first does (None: it is
            # empty), each arm's hits None while its collection is incomplete.
            has_further = self.english is not None or self.second is not None
            where = self.scoped.dense_filter(tenant_id, scope) if has_further else None
            if where is not None:
                k = self.config.dense_candidates * pool_factor
                if self.english is not None and is_english_question(query):  # English only
                    english = extra_dense_hits(
                        self.english, tenant_id=tenant_id, query=query, k=k, where=where
                    )
                    if english is not None:
                        with timed("dense_english"):
                            self._english_dense_arm(tenant_id, recall, english, k)
                if self.second is not None:
                    hits = extra_dense_hits(
                        self.second, tenant_id=tenant_id, query=query, k=k, where=where
                    )
                    if hits is not None:
                        with timed("dense_second"):
                            self._second_dense_arm(recall, hits, k)
        if mode != "dense":
            with timed("keyword"):
                self._keyword_arm(
                    tenant_id,
                    query,
                    recall,
                    with_exact=mode != "keyword",
                    pool_factor=pool_factor,
                    scope=scope,
                )
        return recall

    # --- stages ---

    def _ranked(
        self, tenant_id: str, query: str, recall: Recall, mode: RetrievalMode, window: int | None
    ) -> list[str]:
        """Candidate ids in final order, the chunks of the first `window` loaded (all if None)."""
        with timed("fuse"):
            ordered = fuse(recall, mode, self.config)
        # Only the chunks that can still make the result are fetched (a store round trip).
        window = len(ordered) if window is None else window
        if mode == "rerank":
            window = max(window, self.config.reranker_max_candidates)
        if mode != "dense":
            with timed("keyword"):
                ordered = self._materialise(tenant_id, ordered, recall.candidates, window)
        if mode == "rerank":
            ordered = self._rerank(query, ordered, recall)
        with timed("fuse"):  # the final order's adjustments count as fusion work
            if mode in ("hybrid", "rerank") and self.config.promote_headings:
                ordered = promote_headings(ordered, recall, query)
            ordered = demote_page_roles(ordered, recall, self.config.page_role_shift)
        return ordered

    def _document_hits(
        self, tenant_id: str, query: str, k: int, mode: RetrievalMode, scope: SearchScope
    ) -> tuple[Recall, list[SearchHit]]:
        """One hit per document for the k best documents (app/retrieval/grouping.py): every
        candidate is loaded to learn its document, and the arms widen while the candidates hold
        fewer than k documents and an arm stopped at its limit."""
        factor, found, vector = 1, 0, None
        while True:
            recall = self.recall(tenant_id, query, mode, factor, vector, scope)
            vector = recall.query_vector  # embedded once, whatever the passes
            ordered = self._ranked(tenant_id, query, recall, mode, window=None)
            with timed("fuse"):
                groups = group_by_document(ordered, partial(self._document_of, recall), k)
            widen = factor < MAX_POOL_FACTOR and self._cut_off(recall, factor)
            # A wider pool that brought no new document stops the search (a tenant of one or
            # two long documents must not pay for the widest pool on every query).
            if len(groups) >= k or not widen or (factor > 1 and len(groups) == found):
                break
            factor, found = factor * POOL_GROWTH, len(groups)
        hits = []
        for best, *others in groups:
            hit = self._hit(recall.candidates[best], mode)
            hit.same_document = [self._loaded(recall, cid) for cid in others]
            hits.append(hit)
        return recall, hits

    def _cut_off(self, recall: Recall, factor: int) -> bool:
        """Whether an arm returned as many candidates as it was allowed (more may exist)."""
        return (
            len(recall.dense_ids) >= self.config.dense_candidates * factor
            or len(recall.keyword_ids) >= self.config.keyword_candidates * factor
        )

    @staticmethod
    def _loaded(recall: Recall, chunk_id: str) -> Chunk:
        chunk = recall.candidates[chunk_id].chunk
        assert chunk is not None, "ranked ids are loaded before they are grouped"
        return chunk

    def _document_of(self, recall: Recall, chunk_id: str) -> str:
        return self._loaded(recall, chunk_id).document_id

    def _checked_mode(self, mode: RetrievalMode | None, k: int) -> RetrievalMode:
        mode = mode or self.default_mode
        if mode not in RETRIEVAL_MODES:
            raise ValueError(f"unknown retrieval mode {mode!r}; expected one of {RETRIEVAL_MODES}")
        if mode == "rerank" and self.reranker is None:
            raise ValueError("mode 'rerank' needs a reranker (RAG_RERANKER=cross-encoder)")
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        return mode

    def _dense_arm(
        self,
        tenant_id: str,
        vector: list[float],
        recall: Recall,
        pool_factor: int,
        scope: SearchScope = EVERYTHING,
    ) -> None:
        dense = self.scoped.nearest(
            tenant_id, vector, self.config.dense_candidates * pool_factor, scope
        )
        for rank, (chunk, similarity) in enumerate(dense, start=1):
            cand = recall.candidate(chunk.id)
            cand.chunk = chunk
            cand.dense_rank = rank
            cand.dense_score = similarity
            recall.dense_ids.append(chunk.id)
        recall.best_similarity = max((s for _, s in dense), default=None)

    def _english_dense_arm(
        self, tenant_id: str, recall: Recall, hits: list[tuple[Chunk, float]], k: int
    ) -> None:
        """Reorder the dense list's English chunks by the English arm: the places the first arm
        gave chunks the English collection holds go, in order, to the English arm's ranking;
        the other chunks (other languages) keep the first arm's places, and the English arm's
        further chunks follow, up to `k`. On a tenant of English documents only this is the
        English arm's ranking. Each candidate's dense score is then its own arm's similarity.
        Runs before the keyword arm, as `_second_dense_arm`."""
        assert self.english is not None
        held = self.english.reader.held(tenant_id=tenant_id, chunk_ids=recall.dense_ids)
        english_ids = [chunk.id for chunk, _ in hits]
        for rank, (chunk, similarity) in enumerate(hits, start=1):
            candidate = recall.candidate(chunk.id)
            candidate.chunk = chunk
            candidate.english_dense_rank = rank
            candidate.english_dense_score = similarity
        queue = iter(english_ids)
        dense_ids = []
        for chunk_id in recall.dense_ids:
            if chunk_id not in held:
                dense_ids.append(chunk_id)
            elif (english := next(queue, None)) is not None:
                dense_ids.append(english)
        dense_ids = (dense_ids + list(queue))[:k]
        recall.dense_ids = dense_ids
        recall.english_dense = bool(hits)  # its fusion values only where it ranked something
        kept = set(dense_ids)
        for chunk_id in [c for c in recall.candidates if c not in kept]:
            del recall.candidates[chunk_id]
        for rank, chunk_id in enumerate(dense_ids, start=1):
            candidate = recall.candidates[chunk_id]
            candidate.dense_rank = rank
            if candidate.english_dense_score is not None:
                candidate.dense_score = candidate.english_dense_score

    def _second_dense_arm(self, recall: Recall, hits: list[tuple[Chunk, float]], k: int) -> None:
        """Fuse the second dense arm's ranking into `recall.dense_ids` (the first `k` of the RRF
        of both arms). Runs before the keyword arm: every candidate so far is a dense one, and
        those the fused list left out must not reach the fusion's tail as if exact matches."""
        for rank, (chunk, similarity) in enumerate(hits, start=1):
            candidate = recall.candidate(chunk.id)
            candidate.chunk = chunk
            candidate.second_dense_rank = rank
            candidate.second_dense_score = similarity
        second_ids = [chunk.id for chunk, _ in hits]
        fused = reciprocal_rank_fusion([recall.dense_ids, second_ids], [1.0, 1.0])
        recall.dense_ids = [chunk_id for chunk_id, _ in fused[:k]]
        kept = set(recall.dense_ids)
        for chunk_id in [c for c in recall.candidates if c not in kept]:
            del recall.candidates[chunk_id]

    def _keyword_arm(
        self,
        tenant_id: str,
        query: str,
        recall: Recall,
        with_exact: bool,
        pool_factor: int,
        scope: SearchScope = EVERYTHING,
    ) -> None:
        snapshot = self.scoped.keyword_snapshot(
            tenant_id, self.keyword_index.snapshot(tenant_id), scope
        )
        tokens = self.keyword_index.tokenizer(query)
        weights = question_pronoun_weights(tokens, self.config.keyword_pronoun_weight)
        keyword = snapshot.search(tokens, self.config.keyword_candidates * pool_factor, weights)
        content = content_tokens(tokens, self.keyword_index.tokenizer)
        recall.coverage = snapshot.coverage(content)
        recall.content_match = matches_content_word(
            snapshot, tokens, self.keyword_index.tokenizer, self.config.specific_evidence_max_chunks
        )
        recall.cross_script = snapshot.foreign_share(tokens) > 0.5
        recall.specific_evidence_chunks = specific_evidence_chunks(snapshot, tokens)
        for rank, (chunk_id, score) in enumerate(keyword, start=1):
            cand = recall.candidate(chunk_id)
            cand.keyword_rank = rank
            cand.keyword_score = score
            recall.keyword_ids.append(chunk_id)
        if not with_exact:
            return
        exact = find_exact(
            tenant_id,
            query,
            snapshot,
            self.store,
            self.keyword_index.tokenizer,
            self.config.exact,
            scope,
        )
        recall.exact_terms = [m.term for m in exact]
        if self.config.pin_exact_matches:
            recall.pinned = self._pinned_ids(exact, recall.keyword_ids)
        for chunk_id in recall.pinned:
            recall.candidate(chunk_id).exact_match = True

    def _pinned_ids(self, exact: list[ExactMatch], keyword_ids: list[str]) -> list[str]:
        """Exact-match chunk ids, those the keyword arm ranks first, at most MAX_EXACT_CHUNKS."""
        found = list(dict.fromkeys(cid for match in exact for cid in match.chunk_ids))
        position = {cid: i for i, cid in enumerate(keyword_ids)}
        found.sort(key=lambda cid: position.get(cid, len(position)))
        return found[:MAX_EXACT_CHUNKS]

    def _materialise(
        self,
        tenant_id: str,
        ordered: list[str],
        candidates: dict[str, Candidate],
        window: int,
    ) -> list[str]:
        """Load the chunks of the first `window` candidates; drop ids the store no longer has."""
        head = ordered[:window]
        missing = [cid for cid in head if candidates[cid].chunk is None]
        for chunk in self.store.get_chunks(tenant_id=tenant_id, ids=missing) if missing else []:
            if chunk.tenant_id != tenant_id:
                logger.error("store returned a chunk of another tenant; dropped")
                continue
            candidates[chunk.id].chunk = chunk
        present = [cid for cid in head if candidates[cid].chunk is not None]
        if len(present) < len(head) and len(ordered) > window:
            # Chunks deleted since the keyword snapshot was read: fill up from the rest.
            rest = self._materialise(tenant_id, ordered[window:], candidates, window - len(present))
            return present + rest
        return present + ordered[window:]

    def _rerank(self, query: str, ordered: list[str], recall: Recall) -> list[str]:
        assert self.reranker is not None
        head = ordered[: self.config.reranker_max_candidates]
        passages = []
        for cid in head:
            chunk = recall.candidates[cid].chunk
            assert chunk is not None
            passages.append(chunk.text[: self.config.reranker_max_chars])
        with timed("rerank"):
            scores = self.reranker.score(query, passages) if head else []
        if len(scores) != len(head):
            raise RuntimeError(f"reranker returned {len(scores)} scores for {len(head)} passages")
        for cid, score in zip(head, scores, strict=True):
            recall.candidates[cid].rerank_score = float(score)
        pinned = set(recall.pinned)

        def key(cid: str) -> tuple[int, float]:
            score = recall.candidates[cid].rerank_score
            return (0 if cid in pinned else 1, -float(score if score is not None else 0.0))

        return sorted(head, key=key) + ordered[len(head) :]

    def _hit(self, cand: Candidate, mode: RetrievalMode) -> SearchHit:
        assert cand.chunk is not None
        hit = SearchHit(cand.chunk, cand.score_for(mode), cand.evidence())
        hit.fused_rank, hit.rules = cand.fused_rank, list(cand.rules)
        return hit


def build_retriever(
    settings: Settings,
    embedder: Embedder,
    store: CorpusReader,
    reranker: Reranker | None,
    after_eviction: Callable[[], None] | None = None,
    second: ExtraDense | None = None,
    english: ExtraDense | None = None,
) -> HybridRetriever:
    """The retriever configured by settings; its keyword indexes live under data_dir/keyword."""
    config = RetrieverConfig.from_settings(settings)
    keyword_index = KeywordIndex(
        store,
        settings.data_dir / "keyword",
        keep_snapshots=settings.keyword_snapshots_kept,
        section_paths=settings.section_paths_in("keyword"),
        hot_tenants=settings.hot_tenants,
        after_eviction=after_eviction,
    )
    return HybridRetriever(
        embedder, store, keyword_index, config, reranker, second=second, english=english
    )
