"""Hybrid retrieval: dense + BM25 fused by RRF, exact matches pinned, optional cross-encoder.

`search(tenant, query, k, mode)` is the one entry point. Modes let the eval harness compare
configurations on the same objects: "dense", "keyword", "hybrid", "rerank" (hybrid + reranker).

Keyword freshness relies on the corpus-version check inside `KeywordIndex` (any write through
the store, in any process, bumps the version); the ingest path may call `refresh(tenant)` after a
document changes to pay the rebuild then rather than on the next query, but does not have to.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, get_args

from app.domain import Chunk, RetrievalResult, SearchHit
from app.retrieval.exact_match import MAX_EXACT_CHUNKS, ExactLimits, ExactMatch, find_exact
from app.retrieval.fusion import reciprocal_rank_fusion
from app.retrieval.gate import judge, threshold_for
from app.retrieval.keyword import KeywordIndex
from app.timing import timed

if TYPE_CHECKING:
    from app.config import Settings
    from app.providers.types import Embedder, Reranker
    from app.storage.vector_store import VectorStore

logger = logging.getLogger(__name__)

RetrievalMode = Literal["dense", "keyword", "hybrid", "rerank"]
RETRIEVAL_MODES: tuple[str, ...] = get_args(RetrievalMode)


@dataclass(frozen=True)
class RetrieverConfig:
    """Plain values the retriever needs, taken from Settings by `build_retriever`."""

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


@dataclass
class _Candidate:
    chunk: Chunk | None
    stages: dict[str, float | int | None]


def _empty_stages() -> dict[str, float | int | None]:
    return {
        "dense_rank": None,
        "dense_score": None,
        "keyword_rank": None,
        "keyword_score": None,
        "fused_score": None,
        "rerank_score": None,
        "exact_match": 0,
    }


class HybridRetriever:
    """Finds a tenant's chunks for a question; see the module docstring."""

    def __init__(
        self,
        embedder: Embedder,
        store: VectorStore,
        keyword_index: KeywordIndex,
        config: RetrieverConfig,
        reranker: Reranker | None = None,
    ) -> None:
        self.embedder = embedder
        self.store = store
        self.keyword_index = keyword_index
        self.config = config
        self.reranker = reranker
        self.threshold = threshold_for(embedder.model_id, config.relevance_threshold)

    @property
    def default_mode(self) -> RetrievalMode:
        """Hybrid plus reranking when a reranker is configured, else hybrid."""
        return "rerank" if self.reranker is not None else "hybrid"

    def refresh(self, tenant_id: str) -> None:
        """Rebuild the tenant's keyword index now if its documents changed (optional)."""
        self.keyword_index.refresh(tenant_id)

    def search(
        self, tenant_id: str, query: str, k: int, mode: RetrievalMode | None = None
    ) -> RetrievalResult:
        """The k best chunks of the tenant for `query`, with per-stage evidence and a verdict."""
        mode = mode or self.default_mode
        if mode not in RETRIEVAL_MODES:
            raise ValueError(f"unknown retrieval mode {mode!r}; expected one of {RETRIEVAL_MODES}")
        if mode == "rerank" and self.reranker is None:
            raise ValueError("mode 'rerank' needs a reranker (RAG_RERANKER=cross-encoder)")
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        k = min(k, self.config.max_k)
        if not query.strip():
            return RetrievalResult([], False, "empty question")

        candidates: dict[str, _Candidate] = {}
        dense_ids: list[str] = []
        keyword_ids: list[str] = []
        exact: list[ExactMatch] = []
        best_similarity: float | None = None

        if mode != "keyword":
            with timed("embed_query"):
                vector = self.embedder.embed_query(query)
            with timed("dense"):
                dense = self.store.query(tenant_id, vector, self.config.dense_candidates)
            for rank, (chunk, similarity) in enumerate(dense, start=1):
                cand = candidates.setdefault(chunk.id, _Candidate(chunk, _empty_stages()))
                cand.stages["dense_rank"] = rank
                cand.stages["dense_score"] = similarity
                dense_ids.append(chunk.id)
            best_similarity = max((s for _, s in dense), default=None)

        if mode != "dense":
            with timed("keyword"):
                snapshot = self.keyword_index.snapshot(tenant_id)
                tokens = self.keyword_index.tokenizer(query)
                keyword = snapshot.search(tokens, self.config.keyword_candidates)
                coverage = snapshot.coverage(tokens)
                if mode != "keyword":
                    exact = find_exact(
                        tenant_id,
                        query,
                        snapshot,
                        self.store,
                        self.keyword_index.tokenizer,
                        self.config.exact,
                    )
                for rank, (chunk_id, score) in enumerate(keyword, start=1):
                    cand = candidates.setdefault(chunk_id, _Candidate(None, _empty_stages()))
                    cand.stages["keyword_rank"] = rank
                    cand.stages["keyword_score"] = score
                    keyword_ids.append(chunk_id)
                pinned = self._pinned_ids(exact, keyword_ids)
                for chunk_id in pinned:
                    cand = candidates.setdefault(chunk_id, _Candidate(None, _empty_stages()))
                    cand.stages["exact_match"] = 1
        else:
            pinned = []
            coverage = 0.0

        with timed("fuse"):
            ordered = self._fuse(mode, dense_ids, keyword_ids, candidates, coverage)
            # Exact matches go first (in fused order among themselves): the user meant them.
            pinned_set = set(pinned)
            ordered = [i for i in ordered if i in pinned_set] + [
                i for i in ordered if i not in pinned_set
            ]

        # Only the chunks that can still make the result are fetched (a store round trip).
        window = max(k, self.config.reranker_max_candidates) if mode == "rerank" else k
        if mode != "dense":
            with timed("keyword"):
                ordered = self._materialise(tenant_id, ordered, candidates, window)

        if mode == "rerank":
            ordered = self._rerank(query, ordered, candidates, pinned_set)

        hits = [self._hit(candidates[i], mode) for i in ordered[:k]]
        decision = judge(
            best_similarity,
            self.threshold,
            [m.term for m in exact],
            has_candidates=bool(hits),
        )
        return RetrievalResult(hits, decision.relevant, decision.reason)

    # --- stages ---

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
        candidates: dict[str, _Candidate],
        window: int,
    ) -> list[str]:
        """Load the chunks of the first `window` candidates; drop ids the store no longer has."""
        head = ordered[:window]
        missing = [cid for cid in head if candidates[cid].chunk is None]
        for chunk in self.store.get_chunks(tenant_id, missing) if missing else []:
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

    def _fuse(
        self,
        mode: RetrievalMode,
        dense_ids: list[str],
        keyword_ids: list[str],
        candidates: dict[str, _Candidate],
        coverage: float,
    ) -> list[str]:
        if mode == "dense":
            return dense_ids
        if mode == "keyword":
            return keyword_ids
        # The keyword arm only speaks for the query terms the tenant's text contains: an Arabic
        # question over English documents matches almost nothing, and its few accidental
        # matches must not outvote the dense arm (measured on XQuAD ar->en).
        fused = reciprocal_rank_fusion(
            [dense_ids, keyword_ids],
            [self.config.dense_weight, self.config.keyword_weight * coverage],
            self.config.rrf_k,
        )
        for chunk_id, score in fused:
            candidates[chunk_id].stages["fused_score"] = score
        fused_ids = [cid for cid, _ in fused]
        # Pinned exact matches seen by neither arm still need a place (after the fused ones).
        seen = set(fused_ids)
        return fused_ids + [cid for cid in candidates if cid not in seen]

    def _rerank(
        self,
        query: str,
        ordered: list[str],
        candidates: dict[str, _Candidate],
        pinned: set[str],
    ) -> list[str]:
        assert self.reranker is not None
        head = ordered[: self.config.reranker_max_candidates]
        passages = []
        for cid in head:
            chunk = candidates[cid].chunk
            assert chunk is not None
            passages.append(chunk.text[: self.config.reranker_max_chars])
        with timed("rerank"):
            scores = self.reranker.score(query, passages) if head else []
        if len(scores) != len(head):
            raise RuntimeError(f"reranker returned {len(scores)} scores for {len(head)} passages")
        for cid, score in zip(head, scores, strict=True):
            candidates[cid].stages["rerank_score"] = float(score)

        def key(cid: str) -> tuple[int, float]:
            score = candidates[cid].stages["rerank_score"]
            return (0 if cid in pinned else 1, -float(score if score is not None else 0.0))

        return sorted(head, key=key) + ordered[len(head) :]

    def _hit(self, cand: _Candidate, mode: RetrievalMode) -> SearchHit:
        assert cand.chunk is not None
        stage_for_score = {
            "dense": "dense_score",
            "keyword": "keyword_score",
            "hybrid": "fused_score",
            "rerank": "rerank_score",
        }[mode]
        score = cand.stages.get(stage_for_score)
        if score is None:  # e.g. beyond the reranker cap: fall back to the fused score
            score = cand.stages.get("fused_score")
        return SearchHit(cand.chunk, float(score or 0.0), dict(cand.stages))


def build_retriever(
    settings: Settings,
    embedder: Embedder,
    store: VectorStore,
    reranker: Reranker | None,
) -> HybridRetriever:
    """The retriever configured by settings; its keyword indexes live under data_dir/keyword."""
    config = RetrieverConfig(
        dense_candidates=settings.dense_candidates,
        keyword_candidates=settings.keyword_candidates,
        rrf_k=settings.rrf_k,
        dense_weight=settings.dense_weight,
        keyword_weight=settings.keyword_weight,
        max_k=settings.max_k,
        relevance_threshold=settings.relevance_threshold,
        reranker_max_candidates=settings.reranker_max_candidates,
        reranker_max_chars=settings.reranker_max_chars,
        exact=ExactLimits(
            max_terms=settings.exact_max_terms,
            max_phrases=settings.exact_max_phrases,
            max_scans=settings.exact_max_scans,
            verify_budget=settings.exact_verify_budget,
        ),
    )
    keyword_index = KeywordIndex(
        store, settings.data_dir / "keyword", keep_snapshots=settings.keyword_snapshots_kept
    )
    return HybridRetriever(embedder, store, keyword_index, config, reranker)
