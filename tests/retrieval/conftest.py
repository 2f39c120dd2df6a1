"""Fixtures for retrieval tests: the corpus service over an in-memory index with the fake
embedder (the `embedder` fixture of tests/conftest.py), a retriever over both."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import Settings
from app.retrieval.hybrid import HybridRetriever, build_retriever
from app.services.blocks.corpus import Corpus
from tests.fakes import FakeEmbedder
from tests.retrieval.memory_store import CountingChunkStore, memory_corpus


@pytest.fixture
def store(tmp_path: Path, embedder: FakeEmbedder) -> Corpus:
    return memory_corpus(tmp_path, embedder, CountingChunkStore)  # rows outside data_dir


@pytest.fixture
def chunk_rows(store: Corpus) -> CountingChunkStore:
    """The store's chunk rows, with their read counters."""
    assert isinstance(store.chunks, CountingChunkStore)
    return store.chunks


@pytest.fixture
def retriever(settings: Settings, embedder: FakeEmbedder, store: Corpus) -> HybridRetriever:
    return build_retriever(settings, embedder, store, reranker=None)
