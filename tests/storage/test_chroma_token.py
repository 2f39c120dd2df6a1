"""RAG_CHROMA_TOKEN against a real Chroma server that enforces token authentication.

The server is chromadb's own FastAPI server (`uvicorn chromadb.app:app`, the one the compose
stack's chroma image runs) with its token authentication provider switched on.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chroma_helpers import ingest, python_chroma_server

from app.config import Settings
from testkit.indexing import build_corpus
from tests.fakes import FakeEmbedder

pytestmark = pytest.mark.integration

TOKEN = "test-chroma-token-7d1f"
TOKEN_PROVIDER = "chromadb.auth.token_authn.TokenAuthenticationServerProvider"


@pytest.fixture(scope="module")
def chroma_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A token-protected Chroma server on a free port, for this module."""
    root = tmp_path_factory.mktemp("chroma-token")
    env = {"CHROMA_SERVER_AUTHN_PROVIDER": TOKEN_PROVIDER, "CHROMA_SERVER_AUTHN_CREDENTIALS": TOKEN}
    with python_chroma_server(root, env) as server:
        yield int(server.args[-1])


def _settings(settings: Settings, port: int, token: str) -> Settings:
    return settings.model_copy(
        update={
            "vector_backend": "chroma-http",
            "chroma_host": "127.0.0.1",
            "chroma_port": port,
            "chroma_token": token,
        }
    )


def test_the_configured_token_stores_and_finds_chunks(settings, chroma_port):
    embedder = FakeEmbedder()
    store = build_corpus(_settings(settings, chroma_port, TOKEN), embedder)
    ingest(store, embedder, "acme", "manual.pdf", ["the pump needs oil", "the valve is red"])

    assert store.count("acme") == 2
    hits = store.query(tenant_id="acme", vector=embedder.embed_query("the valve is red"), k=1)
    assert hits[0][0].text == "the valve is red"


@pytest.mark.parametrize("token", ["", "not-the-token"])
def test_a_missing_or_wrong_token_is_refused(settings, chroma_port, token):
    # The client checks its identity when it connects, so the refusal comes at once.
    with pytest.raises(Exception, match=r"(?i)forbidden|unauthori[sz]ed"):
        store = build_corpus(_settings(settings, chroma_port, token), FakeEmbedder())
        store.count("acme")
