"""Races between a running ingestion job and the client: a delete must win."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from app.providers.types import Embedder
from testkit.builders import text_document
from tests.api.harness import ApiFactory, ApiHarness

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    # Small chunks in small batches: the job reports progress often and takes a while.
    return api_factory(chunk_size=300, chunk_overlap=30, embedding_batch_size=8, worker_pool_size=1)


class GatedEmbedder:
    """The real embedder, except that indexing waits at its first batch until released."""

    def __init__(self, real: Embedder) -> None:
        self._real = real
        self.embedding_started = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        self.embedding_started.set()
        assert self.release.wait(timeout=180), "the test never released the embedder"
        return self._real.embed_documents(texts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@pytest.fixture
def gated_embedder(api: ApiHarness) -> Iterator[GatedEmbedder]:
    """Jobs of this app embed through a gate the test opens (cached_property slot swapped)."""
    container = api.container
    real = container.embedder
    gate = GatedEmbedder(real)
    container.__dict__["embedder"] = gate
    try:
        yield gate
    finally:
        gate.release.set()
        container.__dict__["embedder"] = real


def test_a_document_deleted_while_it_is_indexed_stays_deleted(
    api: ApiHarness, gated_embedder: GatedEmbedder
) -> None:
    user = api.add_user("race-delete")
    paragraphs = [
        f"Clause {i}: the ORCHIDVAULT tenant agreement sets rent review {i} at "
        f"{(i * 37) % 90 + 10} percent, payable on day {i % 28 + 1} of each quarter."
        for i in range(200)
    ]
    accepted = api.upload(user, "lease.txt", text_document(*paragraphs)).json()
    # The job is held inside its first embedding batch, so the delete lands mid-indexing every
    # time, however fast or slow the machine is.
    assert gated_embedder.embedding_started.wait(timeout=180), "the job never started embedding"
    job = api.client.get(f"/jobs/{accepted['job_id']}", headers=user.headers).json()
    assert job["status"] == "processing" and job["progress"]["stage"] == "embedding", job
    deleted = api.client.delete(f"/documents/{accepted['document_id']}", headers=user.headers)
    assert deleted.status_code == 204
    gated_embedder.release.set()

    final = api.wait_for_job(user, accepted["job_id"])
    assert final["status"] == "failed", final
    assert "deleted while it was being indexed" in final["error"]
    # It stopped at the end of the embedding call under way, not after embedding the rest of
    # the file's batches (12 calls more before).
    assert gated_embedder.calls == 1, gated_embedder.calls
    doc = api.client.get(f"/documents/{accepted['document_id']}", headers=user.headers)
    assert doc.status_code == 404
    assert api.client.get("/documents", headers=user.headers).json()["count"] == 0
    assert api.search(user, "ORCHIDVAULT rent review")["results"] == []
    assert api.query(user, "What is the ORCHIDVAULT rent review?")["refused"] is True
    assert api.client.get("/stats", headers=user.headers).json()["chunks"] == 0
    assert api.uploads_left() == []
