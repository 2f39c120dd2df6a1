"""Fixtures for retrieval tests: an in-memory store, the fake embedder, a retriever over both."""

from __future__ import annotations

import pytest

from app.config import Settings
from app.retrieval.hybrid import HybridRetriever, build_retriever
from tests.fakes import FakeEmbedder
from tests.retrieval.memory_store import InMemoryVectorStore


@pytest.fixture
def store() -> InMemoryVectorStore:
    return InMemoryVectorStore()


@pytest.fixture
def embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def retriever(
    settings: Settings, embedder: FakeEmbedder, store: InMemoryVectorStore
) -> HybridRetriever:
    return build_retriever(settings, embedder, store, reranker=None)
