"""The retriever: stage evidence, modes, exact-match guarantee, relevance gate, reranking."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.config import Settings
from app.providers.rerankers import build_reranker
from app.retrieval.hybrid import HybridRetriever, build_retriever
from app.services.blocks.corpus import Corpus
from app.timing import start_timer
from testkit.tiny_cross_encoder import save_tiny_cross_encoder
from tests.fakes import FakeEmbedder
from tests.retrieval.memory_store import add_document
from tests.stage_evidence import STAGE_KEYS

pytestmark = pytest.mark.unit

FACTS = [
    "The Nile is the longest river in Africa and flows north into the Mediterranean Sea.",
    "Paris is the capital of France and is known for the Eiffel Tower.",
    "Photosynthesis converts sunlight, water and carbon dioxide into glucose and oxygen.",
    "The SR-33 pressure valve is rated for 40 bar and ships with a spare seal kit.",
    "Mount Everest, on the border of Nepal and China, is the highest mountain on Earth.",
]


def _catalogue(sku: str) -> str:
    return (
        f"Cordless drill, 18 V, two batteries, carrying case, weight 1.6 kg, colour red. "
        f"SKU {sku}. Ships in two days."
    )


SKUS = [f"6672WN55{i:02d}" for i in range(30)]


@pytest.fixture
def facts_retriever(
    retriever: HybridRetriever, store: Corpus, embedder: FakeEmbedder
) -> HybridRetriever:
    add_document(store, embedder, "acme", "facts.txt", FACTS)
    return retriever


def retriever_with(
    settings: Settings, embedder: FakeEmbedder, store: Corpus, **changes: object
) -> HybridRetriever:
    """A retriever over the store (no reranker) with these settings changed."""
    return build_retriever(settings.model_copy(update=changes), embedder, store, None)


def test_hits_carry_text_citation_fields_and_every_stage(
    facts_retriever: HybridRetriever,
) -> None:
    result = facts_retriever.search("acme", "Which river is the longest in Africa?", 3)
    assert result.hits[0].chunk.text == FACTS[0]
    top = result.hits[0]
    assert set(top.stages) == STAGE_KEYS
    assert top.chunk.source == "facts.txt" and top.chunk.page == 1 and top.chunk.page_label == "1"
    assert top.stages["dense_rank"] == 1 and top.stages["keyword_rank"] == 1
    config = facts_retriever.config
    if config.fusion == "rrf":
        both_first = (config.dense_weight + config.keyword_weight) / (config.rrf_k + 1)
        assert top.stages["fused_score"] == pytest.approx(both_first)
    else:  # first in both arms: above the mean of each, so a positive standardised sum
        assert top.stages["fused_score"] is not None and top.stages["fused_score"] > 0
    assert top.stages["rerank_score"] is None
    assert top.score == top.stages["fused_score"]
    assert len(result.hits) == 3
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


def test_modes_use_only_their_arms(facts_retriever: HybridRetriever) -> None:
    question = "capital of France"
    dense = facts_retriever.search("acme", question, 5, mode="dense")
    assert all(h.stages["keyword_rank"] is None for h in dense.hits)
    assert all(h.stages["fused_score"] is None for h in dense.hits)
    keyword = facts_retriever.search("acme", question, 5, mode="keyword")
    assert all(h.stages["dense_rank"] is None for h in keyword.hits)
    assert keyword.hits[0].chunk.text == FACTS[1]
    assert keyword.hits[0].score == keyword.hits[0].stages["keyword_score"]
    with pytest.raises(ValueError, match="reranker"):
        facts_retriever.search("acme", question, 5, mode="rerank")
    with pytest.raises(ValueError, match="mode"):
        facts_retriever.search("acme", question, 5, mode="magic")  # type: ignore[arg-type]


def test_keyword_arm_rescues_what_dense_misses(
    settings: Settings, store: Corpus, embedder: FakeEmbedder
) -> None:
    """A chunk outside the dense candidates still reaches the results through BM25."""
    add_document(store, embedder, "acme", "facts.txt", FACTS)
    narrow = retriever_with(settings, embedder, store, dense_candidates=1)
    result = narrow.search("acme", "seal kit", 5)
    texts = [h.chunk.text for h in result.hits]
    assert FACTS[3] in texts


def test_bad_input(facts_retriever: HybridRetriever) -> None:
    empty = facts_retriever.search("acme", "   ", 5)
    assert empty.hits == [] and not empty.relevant
    with pytest.raises(ValueError):
        facts_retriever.search("acme", "river", 0)
    many = facts_retriever.search("acme", "river", 10_000)
    assert len(many.hits) <= facts_retriever.config.max_k


def test_results_never_contain_another_tenants_chunks(
    retriever: HybridRetriever, store: Corpus, embedder: FakeEmbedder
) -> None:
    add_document(store, embedder, "acme", "facts.txt", FACTS)
    add_document(store, embedder, "globex", "g.txt", ["Globex SR-33 clone, river edition"])
    for mode in ("dense", "keyword", "hybrid"):
        result = retriever.search("globex", "SR-33 river valve Nile", 10, mode=mode)  # type: ignore[arg-type]
        assert {h.chunk.tenant_id for h in result.hits} == {"globex"}
    assert retriever.search("nobody", "river", 5).hits == []


def test_exact_sku_is_first_among_near_identical_items(
    retriever: HybridRetriever, store: Corpus, embedder: FakeEmbedder
) -> None:
    add_document(store, embedder, "shop", "catalogue.txt", [_catalogue(s) for s in SKUS])
    for sku in SKUS:
        for question in (f"What is the weight of {sku}?", f"weight of {sku.lower()}"):
            result = retriever.search("shop", question, 5)
            top = result.hits[0]
            assert f"SKU {sku}." in top.chunk.text, question
            assert top.stages["exact_match"] == 1
            assert sum(h.stages["exact_match"] for h in result.hits) == 1  # type: ignore[misc]
            assert result.relevant and sku.lower() in result.reason.lower()


def test_exact_matches_are_pinned_even_outside_both_arms(
    settings: Settings, store: Corpus, embedder: FakeEmbedder
) -> None:
    texts = [
        "Compare the weight and weight class; compare weight again: weight, weight.",
        "The SR-33 valve weighs 2 kg.",
        "A spare seal kit fits the SR-33.",
        "Weight comparison tables for compare shoppers, weight listed per weight unit.",
    ]
    add_document(store, embedder, "acme", "a.txt", texts)
    narrow = retriever_with(settings, embedder, store, dense_candidates=1, keyword_candidates=1)
    result = narrow.search("acme", "compare weight of SR-33", 3)
    assert {h.chunk.text for h in result.hits[:2]} == {texts[1], texts[2]}


def test_quoted_phrase_pulls_the_chunk_that_contains_it(
    retriever: HybridRetriever, store: Corpus, embedder: FakeEmbedder
) -> None:
    texts = [f"Model {i} has a handle, a red button and a blue light." for i in range(20)]
    texts.append("Model 20 has a red handle and a blue button.")
    add_document(store, embedder, "acme", "a.txt", texts)
    result = retriever.search("acme", 'Which model has the "red handle"?', 3)
    assert result.hits[0].chunk.text == texts[-1]
    assert result.hits[0].stages["exact_match"] == 1


def test_gate_refuses_unrelated_questions_and_accepts_related_ones(
    settings: Settings, store: Corpus, embedder: FakeEmbedder
) -> None:
    add_document(store, embedder, "acme", "facts.txt", FACTS)
    gated = retriever_with(settings, embedder, store, relevance_threshold=0.35)
    related = gated.search("acme", "Which river is the longest in Africa?", 3)
    assert related.relevant and ">=" in related.reason
    unrelated = gated.search("acme", "recipe for banana bread with walnuts", 3)
    assert not unrelated.relevant
    assert "< threshold 0.350" in unrelated.reason
    assert unrelated.hits  # the candidates are still shown, the answer path decides
    # An exact identifier counts as relevant even when the wording is otherwise far off.
    exact = gated.search("acme", "banana bread walnuts sr-33", 3)
    assert exact.relevant and "SR-33" in exact.reason.upper()


def test_gate_with_nothing_indexed(retriever: HybridRetriever) -> None:
    result = retriever.search("empty-tenant", "anything at all", 5)
    assert result.hits == [] and not result.relevant and result.reason


def test_stages_are_timed_separately_and_add_up(facts_retriever: HybridRetriever) -> None:
    timer = start_timer()
    facts_retriever.search("acme", "highest mountain SR-33", 3)
    assert set(timer.stages) == {"embed_query", "dense", "keyword", "fuse"}
    assert sum(timer.stages.values()) <= timer.total_ms() + 1e-6


def test_keyword_index_is_not_rebuilt_per_query_and_refresh_pays_up_front(
    retriever: HybridRetriever, store: Corpus, embedder: FakeEmbedder
) -> None:
    add_document(store, embedder, "acme", "facts.txt", FACTS)
    for _ in range(10):
        retriever.search("acme", "river", 3)
    assert retriever.keyword_index.rebuilds["acme"] == 1
    add_document(store, embedder, "acme", "more.txt", ["The Danube flows through Vienna."])
    retriever.refresh("acme")
    assert retriever.keyword_index.rebuilds["acme"] == 2
    assert retriever.search("acme", "Danube", 1).hits[0].chunk.text.startswith("The Danube")
    assert retriever.keyword_index.rebuilds["acme"] == 2


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"))


def test_rerank_mode_orders_by_the_cross_encoder_within_its_cap(
    settings: Settings, store: Corpus, embedder: FakeEmbedder, tiny_model: Path
) -> None:
    add_document(store, embedder, "acme", "facts.txt", FACTS)
    configured = settings.model_copy(
        update={
            "reranker": "cross-encoder",
            "reranker_model": str(tiny_model),
            "reranker_max_candidates": 3,
        }
    )
    reranker = build_reranker(configured)
    retriever = build_retriever(configured, embedder, store, reranker)
    assert retriever.default_mode == "rerank"
    timer = start_timer()
    result = retriever.search("acme", "the river and the mountain and the capital", 5)
    assert "rerank" in timer.stages
    scored = [h for h in result.hits if h.stages["rerank_score"] is not None]
    assert len(scored) == 3  # the cap, not every candidate
    assert result.hits[:3] == scored
    assert [h.score for h in scored] == sorted((h.score for h in scored), reverse=True)
    # The same candidates, scored directly, give the same numbers.
    assert reranker is not None
    direct = reranker.score(
        "the river and the mountain and the capital", [h.chunk.text for h in scored]
    )
    assert direct == pytest.approx([h.stages["rerank_score"] for h in scored], abs=1e-5)


def test_identifier_with_symbols_is_matched_as_typed(
    retriever: HybridRetriever, store: Corpus, embedder: FakeEmbedder
) -> None:
    texts = [f"Invoice {n}: 45 units shipped, total {n * 3} EUR." for n in range(100, 120)]
    texts.append("Invoice #45 was cancelled by the customer.")
    add_document(store, embedder, "acme", "invoices.txt", texts)
    result = retriever.search("acme", "what happened to #45", 3)
    assert result.hits[0].chunk.text == texts[-1]
    assert sum(h.stages["exact_match"] for h in result.hits) == 1  # type: ignore[misc]


def test_keyword_arm_weighs_only_the_query_terms_the_tenant_has(
    facts_retriever: HybridRetriever,
) -> None:
    """A question in words the corpus lacks (another language) is ranked by the dense arm."""
    snapshot = facts_retriever.keyword_index.snapshot("acme")
    tokens = facts_retriever.keyword_index.tokenizer("Nile xyzzy plugh")
    assert snapshot.coverage(tokens) == pytest.approx(1 / 3)
    assert snapshot.coverage(facts_retriever.keyword_index.tokenizer("qwerty zork")) == 0.0

    query = "zork qwerty Eiffel"  # one accidental keyword match among unknown words
    config = replace(facts_retriever.config, fusion="rrf")  # the weights as RRF reads them
    by_rank = HybridRetriever(
        facts_retriever.embedder, facts_retriever.store, facts_retriever.keyword_index, config
    )
    hybrid = by_rank.search("acme", query, 5, "hybrid")
    dense = by_rank.search("acme", query, 5, "dense")
    coverage = snapshot.coverage(facts_retriever.keyword_index.tokenizer(query))
    top = hybrid.hits[0]
    expected = config.dense_weight / (config.rrf_k + top.stages["dense_rank"])
    if top.stages["keyword_rank"] is not None:
        expected += config.keyword_weight * coverage / (config.rrf_k + top.stages["keyword_rank"])
    assert top.stages["fused_score"] == pytest.approx(expected)
    assert {h.chunk.id for h in hybrid.hits} >= {dense.hits[0].chunk.id}
