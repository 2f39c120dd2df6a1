"""Builders shared by the Chroma store tests: chunks of a document as ingestion would make them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from app.domain import Chunk, chunk_id, document_id
from app.providers.types import Embedder
from app.services.blocks.corpus import Corpus


def make_chunks(
    tenant: str, source: str, texts: Sequence[str], page: int = 1, label: str | None = None
) -> list[Chunk]:
    """Chunks of one page of one document, ids computed the way ingestion computes them."""
    doc = document_id(tenant, source)
    chunks, offset = [], 0
    for index, text in enumerate(texts):
        chunks.append(
            Chunk(
                id=chunk_id(tenant, doc, page, text),
                tenant_id=tenant,
                document_id=doc,
                source=source,
                page=page,
                page_label=label if label is not None else str(page),
                chunk_index=index,
                start=offset,
                end=offset + len(text),
                text=text,
            )
        )
        offset += len(text)
    return chunks


def ingest(
    store: Corpus, embedder: Embedder, tenant: str, source: str, texts: Sequence[str]
) -> list[Chunk]:
    """Embed and store `texts` as the whole of document `source`; returns its chunks."""
    chunks = make_chunks(tenant, source, texts)
    vectors = embedder.embed_documents([c.text for c in chunks])
    store.replace_documents(
        tenant_id=tenant, documents=[(document_id(tenant, source), chunks, vectors)]
    )
    return chunks


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def python_chroma_server(root: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """chromadb's own FastAPI server (`uvicorn chromadb.app:app`, the one the compose stack's
    chroma image runs), persisting under `root`, with `env` added; yields the process once its
    heartbeat answers (its port is `process.args[-1]`), fails the test if it does not start."""
    pytest.importorskip("opentelemetry.instrumentation.fastapi")  # the server needs it
    port = free_port()
    full_env = {
        **os.environ,
        "IS_PERSISTENT": "TRUE",
        "PERSIST_DIRECTORY": str(root / "data"),
        "ANONYMIZED_TELEMETRY": "False",
        **env,
    }
    root.mkdir(parents=True, exist_ok=True)
    log_path = root / "server.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "chromadb.app:app", "--port", str(port)],
            cwd=root,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 90
            while True:
                try:
                    url = f"http://127.0.0.1:{port}/api/v2/heartbeat"
                    httpx.get(url, timeout=1).raise_for_status()
                    break
                except httpx.HTTPError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        log.flush()
                        pytest.fail(f"chroma server did not start:\n{log_path.read_text()}")
                    time.sleep(0.3)
            yield server
        finally:
            server.terminate()
            server.wait(timeout=30)
