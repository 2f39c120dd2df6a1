"""Fixtures shared by the provider tests that talk to real servers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.providers.llm_servers import ServerProcess, start_llama_server


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """llama-cpp-python's OpenAI-compatible server on the shipped GGUF, for this session."""
    server = start_llama_server(tmp_path_factory.mktemp("llama-server"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llama_embedding_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The same server on the same GGUF serving `/v1/embeddings`, for this session."""
    server = start_llama_server(tmp_path_factory.mktemp("llama-embeddings"), embedding=True)
    yield server
    server.stop()
