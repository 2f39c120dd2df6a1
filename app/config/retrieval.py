"""The settings of the vector store, hybrid retrieval (candidates, fusion, gate) and the reranker.

Mixed with the other concerns into the one `app.config.Settings`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from app.config.fields import setting
from app.request_limits import K_CEILING

RerankerProvider = Literal["none", "cross-encoder"]
VectorBackend = Literal["chroma", "chroma-http"]
# How the retriever fuses its two arms (app/retrieval/hybrid.py).
FusionMethod = Literal["rrf", "scores", "blend"]


class RetrievalSettings(BaseModel):
    """The vector store, hybrid retrieval (candidates, fusion, gate) and the reranker."""

    vector_backend: VectorBackend = setting(
        "chroma",
        group="vector",
        description="chroma: embedded persistent directory (one process owns it) | chroma-http: "
        "a Chroma server.",
    )
    chroma_host: str = setting("127.0.0.1", group="vector", description="Chroma server host.")
    chroma_port: int = setting(
        8001, group="vector", description="Chroma server port.", ge=1, le=65535
    )
    chroma_token: str = setting(
        "",
        group="vector",
        description="Token for a Chroma server started with token authentication (sent as a "
        "Bearer token).",
        repr=False,
    )
    top_k: int = setting(
        5, group="retrieval", unit="results", description="Results returned by default.", gt=0
    )
    max_k: int = setting(
        50,
        group="retrieval",
        unit="results",
        description=f"Largest k a client may ask for (at most {K_CEILING}).",
        gt=0,
        le=K_CEILING,
    )
    dense_candidates: int = setting(
        30,
        group="retrieval",
        unit="chunks",
        description="Candidates taken from the dense arm before Reciprocal Rank Fusion.",
        gt=0,
    )
    keyword_candidates: int = setting(
        30,
        group="retrieval",
        unit="chunks",
        description="Candidates taken from the keyword (BM25) arm before Reciprocal Rank Fusion.",
        gt=0,
    )
    rrf_k: int = setting(
        5,
        group="retrieval",
        description="The fusion's RRF constant (tuned on the eval data: 5 beat 60 on every set); "
        "used by RAG_FUSION=rrf and for cross-script questions.",
        gt=0,
    )
    dense_weight: float = setting(
        0.3,
        group="retrieval",
        description="The dense arm's fusion weight (0.3 won held out: eval/tune_fusion.py, tuned "
        "on ARCD train + XQuAD dev).",
        ge=0,
    )
    keyword_weight: float = setting(
        1.0, group="retrieval", description="The keyword arm's fusion weight.", ge=0
    )
    fusion: FusionMethod = setting(
        "blend",
        group="retrieval",
        description="How the two arms are fused: scores (each arm's scores standardised over its "
        "own candidates, weighted RAG_SCORE_DENSE_WEIGHT and RAG_KEYWORD_WEIGHT, so an arm whose "
        "best candidates stand out counts for more on that query), rrf (Reciprocal Rank Fusion "
        "with RAG_RRF_K and RAG_DENSE_WEIGHT) or blend (both orders fused again by RRF with "
        "RAG_BLEND_RRF_K, the score order weighing RAG_BLEND_SCORE_WEIGHT). Cross-script questions "
        "are fused by rank whatever the value. blend is the default: the best "
        "leave-one-manual-out mean without losing more than 0.02 MRR on any manual "
        "(docs/evaluation.md).",
    )
    blend_rrf_k: int = setting(
        60,
        group="retrieval",
        description="RAG_FUSION=blend: the RRF constant that fuses the rank order and the score "
        "order.",
        gt=0,
    )
    blend_score_weight: float = setting(
        2.0,
        group="retrieval",
        description="RAG_FUSION=blend: the score order's weight (the rank order's is 1).",
        ge=0,
    )
    score_dense_weight: float = setting(
        0.5,
        group="retrieval",
        description="The dense arm's weight in the score order (RAG_FUSION=scores or blend; "
        "the keyword arm's is "
        "RAG_KEYWORD_WEIGHT).",
        ge=0,
    )
    score_dense_spread: float = setting(
        0.08,
        group="retrieval",
        description="RAG_FUSION=scores: the least spread (standard deviation, in similarity "
        "units) the dense scores of a query are divided by, so a flat list, every passage about "
        "as close, is not stretched as if its first ones stood out. Tuned for the use embedder.",
        ge=0,
    )
    score_keyword_spread: float = setting(
        2.0,
        group="retrieval",
        description="RAG_FUSION=scores: the same floor for the BM25 scores.",
        ge=0,
    )
    reserve_dense_first: int = setting(
        2,
        group="retrieval",
        unit="chunks",
        description="The dense arm's first this many candidates are kept inside the first "
        "RAG_RESERVE_WITHIN places of the fused ranking (after exact matches), however strongly "
        "the keyword arm disagrees (0: off). On by default: the dense arm's first two kept "
        "within the first 5 places was chosen in 14 of 15 leave-one-manual-out folds (the "
        "other chose the first one).",
        ge=0,
    )
    reserve_keyword_first: int = setting(
        0,
        group="retrieval",
        unit="chunks",
        description="The same for the keyword arm's first candidates, when fusion counts that "
        "arm (not for a question the keyword gate or a cross-script question left to the dense "
        "arm; 0: off).",
        ge=0,
    )
    reserve_within: int = setting(
        5,
        group="retrieval",
        unit="places",
        description="The places of the fused ranking that RAG_RESERVE_DENSE_FIRST and "
        "RAG_RESERVE_KEYWORD_FIRST reserve (0: no reservation).",
        ge=0,
    )
    reserve_dense_top_within: int = setting(
        4,
        group="retrieval",
        unit="places",
        description="The dense arm's very first candidate is kept inside this many places of the "
        "fused ranking (after exact matches), a tighter bound than RAG_RESERVE_WITHIN gives it "
        "(0: off). 4 was chosen in all 15 leave-one-manual-out folds: no manual loses, and the "
        "hybrid is no longer under its dense arm on any manual (docs/evaluation.md).",
        ge=0,
    )
    keyword_pronoun_weight: float = setting(
        1.0,
        group="retrieval",
        description="The share of its BM25 weight each of a question's first- and second-person "
        "pronouns (I, me, my, we, our, you, your...) keeps. Manuals rarely hold them (a loop "
        "variable i, an option -i), so at full weight they count as rare words and rank such "
        'passages first for any question worded "How do I ...". 1: scored like any word; 0: '
        "left out. Between, the pronoun still breaks ties (an option -i a question's I happens "
        "to name) without outweighing the question's other words (docs/evaluation.md).",
        ge=0,
        le=1,
    )
    keyword_coverage_power: float = setting(
        1.0,
        group="retrieval",
        description="The keyword arm's weight is multiplied by coverage ** power (coverage: "
        "share of the query's terms found in the tenant's text), so cross-language questions "
        "rely on the dense arm; 0 switches the scaling off.",
        ge=0,
    )
    cross_script_rrf_k: int = setting(
        0,
        group="retrieval",
        description="A query mostly in a script the tenant's text lacks (an Arabic question over "
        "English documents) is fused with this RRF k, the keyword arm unscaled (0: same as other "
        "queries).",
        ge=0,
    )
    cross_script_dense_weight: float = setting(
        1.0,
        group="retrieval",
        description="The dense weight for such cross-script queries (when RAG_CROSS_SCRIPT_RRF_K "
        "is set).",
        ge=0,
    )
    specific_evidence_max_chunks: int = setting(
        2,
        group="retrieval",
        unit="chunks",
        description="When at most this many chunks hold all of a query's numbers and words in "
        "another script than the query's (a year or a Latin name in an Arabic question), the "
        "keyword arm weighs at least as much as the dense arm whatever the coverage (0: off).",
        ge=0,
    )
    keyword_gate: bool = setting(
        True,
        group="retrieval",
        description="Rank by the dense arm alone a query that matched no content word of the "
        "tenant's text in its own script and no number, counting none that more than half of "
        "the tenant's chunks hold, nor, in a script the tenant's text only borrows, one more "
        "than RAG_SPECIFIC_EVIDENCE_MAX_CHUNKS chunks hold (only function words, other-script "
        "words like the Arabic 'ﷺ' expands to, near-ubiquitous words, or nothing), unless "
        "RAG_SPECIFIC_EVIDENCE_MAX_CHUNKS applies (docs/evaluation.md).",
    )
    page_role_shift: int = setting(
        10,
        group="retrieval",
        unit="places",
        description="Places a contents, index, list-of-figures, bibliography, blank or cover page "
        "yields to content pages in the ranking (0: no demotion; such pages are never dropped).",
        ge=0,
    )
    exact_scope_chunks: int = setting(
        20_000,
        group="retrieval",
        unit="chunks",
        description="A search scope (the collections a caller reads, narrowed by filters) of at "
        "most this many chunks is searched exactly by the dense arm, every vector compared; a "
        "larger one through the vector index's metadata filter.",
        ge=0,
    )
    relevance_threshold: float | None = setting(
        None,
        group="retrieval",
        description="Minimum dense similarity for a passage to count as relevant; empty = "
        "calibrated per model.",
    )
    reranker: RerankerProvider = setting(
        "none", group="reranker", description="none | cross-encoder."
    )
    reranker_model: str = setting(
        "cross-encoder/mmarco-mMiniLMv2-L12-H384-v1",
        group="reranker",
        description="The cross-encoder's model name.",
    )
    reranker_max_candidates: int = setting(
        20, group="reranker", unit="chunks", description="Fused candidates reranked.", gt=0
    )
    reranker_max_chars: int = setting(
        1200,
        group="reranker",
        unit="characters",
        description="Characters of each candidate the cross-encoder reads.",
        gt=0,
    )
    reranker_batch_size: int = setting(
        16, group="reranker", unit="pairs", description="Pairs scored per call.", gt=0
    )
