"""RAG_CHROMA_TOKEN against a real Chroma server that enforces token authentication.

The server is chromadb's own FastAPI server (`uvicorn chromadb.app:app`, the one the compose
stack's chroma image runs) with its token authentication provider switched on.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from chroma_helpers import ingest

from app.config import Settings
from app.services.corpus import build_corpus
from tests.fakes import FakeEmbedder

pytestmark = pytest.mark.integration

TOKEN = "test-chroma-token-7d1f"
TOKEN_PROVIDER = "chromadb.auth.token_authn.TokenAuthenticationServerProvider"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def chroma_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A token-protected Chroma server on a free port, for this module."""
    pytest.importorskip("opentelemetry.instrumentation.fastapi")  # the server needs it
    root = tmp_path_factory.mktemp("chroma-token")
    port = _free_port()
    env = {
        **os.environ,
        "IS_PERSISTENT": "TRUE",
        "PERSIST_DIRECTORY": str(root / "data"),
        "ANONYMIZED_TELEMETRY": "False",
        "CHROMA_SERVER_AUTHN_PROVIDER": TOKEN_PROVIDER,
        "CHROMA_SERVER_AUTHN_CREDENTIALS": TOKEN,
    }
    log = (root / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "chromadb.app:app", "--port", str(port)],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    output = (root / "server.log").read_text()
                    pytest.fail(f"chroma server did not start:\n{output}")
                time.sleep(0.3)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


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
    hits = store.query("acme", embedder.embed_query("the valve is red"), 1)
    assert hits[0][0].text == "the valve is red"


@pytest.mark.parametrize("token", ["", "not-the-token"])
def test_a_missing_or_wrong_token_is_refused(settings, chroma_port, token):
    # The client checks its identity when it connects, so the refusal comes at once.
    with pytest.raises(Exception, match=r"(?i)forbidden|unauthori[sz]ed"):
        store = build_corpus(_settings(settings, chroma_port, token), FakeEmbedder())
        store.count("acme")
