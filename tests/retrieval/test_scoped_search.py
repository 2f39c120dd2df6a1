"""A scoped search is the unscoped ranking filtered to the scope, in the same order, with k
results whenever the scope holds k: the scope is applied inside each arm, never afterwards.

Property-tested over random corpora, scopes (documents, and chunks for page filters) and
questions, for the dense and keyword arms, on the in-memory index (the Chroma variants are in
tests/retrieval/test_scoped_search_chroma.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.config import Settings
from app.retrieval.hybrid import HybridRetriever, build_retriever
from app.retrieval.scope import SearchScope
from app.services.blocks.corpus import Corpus
from tests.fakes import FakeEmbedder
from tests.retrieval.memory_store import add_document, memory_corpus

pytestmark = pytest.mark.unit

WORDS = ["valve", "pump", "seal", "river", "bolt", "torque", "pressure", "manual", "engine", "oil"]

corpora = st.lists(
    st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), min_size=1, max_size=3),
    min_size=2,
    max_size=6,
)
questions = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)


@dataclass(frozen=True)
class ScopedSearch:
    """A corpus, a scope over it (documents picked by index, maybe only their first pages), a
    question and k: one case of every scoped-search property."""

    corpus: list[list[list[str]]]
    picks: list[int]
    page_one_only: bool
    question: str
    k: int


scoped_searches = st.builds(
    ScopedSearch,
    corpus=corpora,
    picks=st.lists(st.integers(0, 5), max_size=6),
    page_one_only=st.booleans(),
    question=questions,
    k=st.integers(1, 8),
)


def build(store: Corpus, embedder: FakeEmbedder, corpus: list[list[list[str]]]) -> list[str]:
    """Documents of chunks; each chunk carries a token of its own, so no two vectors tie."""
    ids = []
    for d, pages in enumerate(corpus):
        texts = [" ".join([*words, f"d{d}c{c}"]) for c, words in enumerate(pages)]
        ids.append(add_document(store, embedder, "acme", f"doc{d}.txt", texts)[0].document_id)
    return ids


def ranked(
    retriever: HybridRetriever, question: str, k: int, mode: str, scope: SearchScope
) -> list[tuple[str, float]]:
    result = retriever.search("acme", question, k, mode=mode, scope=scope)  # type: ignore[arg-type]
    return [(hit.chunk.id, round(hit.score, 4)) for hit in result.hits]


def same_ranking(got: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    """Equal scores in the same order, and the same ids wherever the scores leave no tie
    (equal vectors may come back in either order from an approximate index)."""
    assert [s for _, s in got] == [s for _, s in expected]
    cut = expected[-1][1] if expected else None
    for score in {s for _, s in expected}:
        if score != cut:
            assert {c for c, s in got if s == score} == {c for c, s in expected if s == score}


def check_scoped_equals_filtered(
    retriever: HybridRetriever, store: Corpus, embedder: FakeEmbedder, search: ScopedSearch
) -> None:
    """Once the corpus is in the store, searching inside the picked documents (page 1 only:
    their first pages) ranks as searching everything and keeping what the scope allows, in
    both arms."""
    documents = build(store, embedder, search.corpus)
    allowed_docs = frozenset(documents[i] for i in search.picks if i < len(documents))
    owners = store.chunk_owners("acme")
    chunks = None
    if search.page_one_only:  # a page filter: chunk-level scope
        chunks = frozenset(cid for cid, doc, page in owners if page == 1 and doc in allowed_docs)
    scope = SearchScope(allowed_docs, chunks, key="test")
    document_of = {c: d for c, d, _ in owners}
    for mode in ("dense", "keyword"):
        everything = ranked(retriever, search.question, 50, mode, SearchScope())
        expected = [
            (cid, score)
            for cid, score in everything
            if document_of[cid] in allowed_docs and (chunks is None or cid in chunks)
        ][: search.k]
        got = ranked(retriever, search.question, search.k, mode, scope)
        assert all(document_of[cid] in allowed_docs for cid, _ in got), mode
        same_ranking(got, expected)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(search=scoped_searches)
def test_a_scoped_search_is_the_unscoped_ranking_filtered_in_order(
    tmp_path_factory: pytest.TempPathFactory, settings_for_scope: Settings, search: ScopedSearch
) -> None:
    embedder = FakeEmbedder()
    store = memory_corpus(tmp_path_factory.mktemp("scoped"), embedder)
    retriever = build_retriever(settings_for_scope, embedder, store, reranker=None)
    check_scoped_equals_filtered(retriever, store, embedder, search)


@pytest.fixture
def settings_for_scope(settings: Settings) -> Settings:
    return settings


def test_an_empty_scope_finds_nothing_never_everything(
    retriever: HybridRetriever, store: Corpus, embedder: FakeEmbedder
) -> None:
    build(store, embedder, [[["valve", "pump"]], [["valve", "seal"]]])
    for scope in (SearchScope(frozenset()), SearchScope(None, frozenset())):
        result = retriever.search("acme", "valve", 5, scope=scope)
        assert result.hits == [] and not result.relevant


def test_a_scope_fills_k_from_its_own_chunks_even_when_others_rank_higher(
    retriever: HybridRetriever, store: Corpus, embedder: FakeEmbedder
) -> None:
    """A post-filter would return nothing here: the 30 best chunks are all outside the scope."""
    add_document(
        store, embedder, "acme", "loud.txt", [f"valve pressure seal {i}" for i in range(40)]
    )
    quiet = add_document(
        store, embedder, "acme", "quiet.txt", [f"river valve note {i}" for i in range(5)]
    )
    scope = SearchScope(frozenset({quiet[0].document_id}), key="quiet")
    for mode in ("dense", "keyword", "hybrid"):
        result = retriever.search("acme", "valve pressure seal", 5, mode=mode, scope=scope)  # type: ignore[arg-type]
        assert {h.chunk.document_id for h in result.hits} == {quiet[0].document_id}, mode
        assert len(result.hits) == 5, mode


def test_exact_matches_outside_the_scope_are_neither_pinned_nor_counted(
    retriever: HybridRetriever, store: Corpus, embedder: FakeEmbedder
) -> None:
    add_document(store, embedder, "acme", "secret.txt", ["Part 6672WN5504 is the board's pick"])
    public = add_document(store, embedder, "acme", "public.txt", ["Parts list for the drill"])
    scope = SearchScope(frozenset({public[0].document_id}), key="public")
    result = retriever.search("acme", "6672WN5504", 5, scope=scope)
    assert all(h.chunk.document_id == public[0].document_id for h in result.hits)
    assert all(not h.stages["exact_match"] for h in result.hits)
    unscoped = retriever.search("acme", "6672WN5504", 5)
    assert unscoped.hits[0].chunk.source == "secret.txt" and unscoped.hits[0].stages["exact_match"]


def test_the_relevance_gate_judges_only_the_scope(
    retriever: HybridRetriever, store: Corpus, embedder: FakeEmbedder
) -> None:
    """The question matches a hidden document word for word: the gate must not call the
    search relevant because of it, nor show its similarity."""
    add_document(store, embedder, "acme", "secret.txt", ["valve pressure seal torque"])
    public = add_document(store, embedder, "acme", "public.txt", ["river oil engine manual"])
    scope = SearchScope(frozenset({public[0].document_id}), key="public")
    question = "valve pressure seal torque"
    retriever.threshold = 0.5  # as calibrated for a real embedder
    unscoped = retriever.search("acme", question, 5)
    scoped = retriever.search("acme", question, 5, scope=scope)
    assert unscoped.relevant and unscoped.hits[0].chunk.source == "secret.txt"
    assert not scoped.relevant
    gate = scoped.explain["gate"]
    assert gate["best_similarity"] < unscoped.explain["gate"]["best_similarity"]
    assert gate["best_similarity"] == pytest.approx(
        max(h.stages["dense_score"] for h in scoped.hits)
    )


def test_a_large_scope_goes_through_the_index_filter_with_the_same_ranking(
    tmp_path: Path, settings: Settings, embedder: FakeEmbedder
) -> None:
    store = memory_corpus(tmp_path, embedder)
    exact = build_retriever(settings, embedder, store, reranker=None)
    filtered = build_retriever(
        settings.model_copy(update={"exact_scope_chunks": 0}), embedder, store, reranker=None
    )
    documents = build(store, embedder, [[["valve", "pump"]] * 3, [["pump", "seal"]] * 2, [["oil"]]])
    scope = SearchScope(frozenset(documents[:2]), key="two")
    assert ranked(exact, "pump valve", 4, "dense", scope) == ranked(
        filtered, "pump valve", 4, "dense", scope
    )
