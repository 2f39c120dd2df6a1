"""The ingestion pipeline on real files into a real Chroma directory (fake embedder for speed)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.config import Settings
from app.ingestion import LoadLimits
from app.providers.embeddings import FakeEmbedder
from app.services.pipeline import PipelineConfig, index_file
from app.storage.chroma_store import ChromaVectorStore, build_vector_store

pytestmark = pytest.mark.integration

PARAGRAPHS = [
    f"Paragraph {i} describes part number PN-{i:04d} and its torque of {i} Nm." for i in range(30)
]


class RecordingEmbedder(FakeEmbedder):
    """The fake embedder, recording which thread embedded each batch; can fail on one batch."""

    def __init__(self, fail_on_batch: int | None = None) -> None:
        super().__init__()
        self.threads: list[str] = []
        self._fail_on_batch = fail_on_batch

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.threads.append(threading.current_thread().name)
        if self._fail_on_batch == len(self.threads):
            raise ConnectionError("embedding server went away")
        return super().embed_documents(texts)


def _config(settings: Settings, batch_size: int) -> PipelineConfig:
    return PipelineConfig(
        chunk_size=120,
        chunk_overlap=0,
        limits=LoadLimits.from_settings(settings),
        parse_timeout_s=settings.parse_timeout_s,
        batch_size=batch_size,
    )


def _write(folder: Path, paragraphs: list[str]) -> Path:
    path = folder / "parts.txt"
    path.write_text("\n\n".join(paragraphs), encoding="utf-8")
    return path


def _store(settings: Settings) -> ChromaVectorStore:
    return build_vector_store(settings, FakeEmbedder())


def test_batches_are_embedded_ahead_on_a_helper_thread_and_all_stored(settings, tmp_path):
    store = _store(settings)
    embedder = RecordingEmbedder()
    progress: list[tuple[int, int, str]] = []
    path = _write(tmp_path, PARAGRAPHS)

    result = index_file(
        path,
        tenant_id="acme",
        source="parts.txt",
        embedder=embedder,
        store=store,
        config=_config(settings, batch_size=4),
        progress=lambda done, total, stage: progress.append((done, total, stage)),
    )

    print(f"{result.chunks} chunks in {len(embedder.threads)} batches")
    assert result.chunks == store.count("acme") >= len(PARAGRAPHS)
    assert len(embedder.threads) == -(-result.chunks // 4)
    assert all(name.startswith("embed") for name in embedder.threads)
    embedding = [done for done, _, stage in progress if stage == "embedding"]
    assert embedding == sorted(embedding) and embedding[-1] == result.chunks
    assert len(embedding) == len(embedder.threads) + 1  # 0, then after every batch
    hits = store.find_containing("acme", "PN-0029", 5)
    assert [h.source for h in hits] == ["parts.txt"]


def test_batched_ingestion_stores_the_same_chunks_as_one_batch(settings, tmp_path):
    path = _write(tmp_path, PARAGRAPHS)
    ids = []
    for tenant, batch_size in (("small", 3), ("whole", 1000)):
        store = _store(settings)
        index_file(
            path,
            tenant_id=tenant,
            source="parts.txt",
            embedder=FakeEmbedder(),
            store=store,
            config=_config(settings, batch_size),
        )
        ids.append(sorted(c.text for c in store.iter_chunks(tenant)))
    assert ids[0] == ids[1]


def test_an_embedding_failure_midway_keeps_the_previous_version(settings, tmp_path):
    store = _store(settings)
    config = _config(settings, batch_size=4)
    path = _write(tmp_path, PARAGRAPHS)
    index_file(
        path,
        tenant_id="acme",
        source="parts.txt",
        embedder=FakeEmbedder(),
        store=store,
        config=config,
    )
    before = {c.id for c in store.iter_chunks("acme")}
    changed = _write(tmp_path, [p.replace("torque", "TORQUE") for p in PARAGRAPHS])

    with pytest.raises(ConnectionError):
        index_file(
            changed,
            tenant_id="acme",
            source="parts.txt",
            embedder=RecordingEmbedder(fail_on_batch=3),
            store=store,
            config=config,
        )

    assert {c.id for c in store.iter_chunks("acme")} == before
    assert store.find_containing("acme", "TORQUE", 5) == []
