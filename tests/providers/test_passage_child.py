"""Passages embedded in a child process (RAG_EMBEDDING_CHILD_PROCESS): the same vectors as in
process, the question stays in process, a child that dies is replaced, a failing model is
reported; a worker holds the model only in its child; with the setting off the model runs in
process. Real `use` model, real child."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from app.config import Settings, load_settings
from app.container import Container
from app.providers.embeddings import build_embedder
from app.providers.passage_child import PassageChildEmbedder, PassageChildError
from app.providers.types import Embedder
from tests.fakes import FakeEmbedder
from tests.providers.passage_child_probe import child_pid, local_model_loaded

PASSAGES = [
    "تُدفع الفواتير خلال ثلاثين يوماً من استلامها.",
    "The server room is cooled to eighteen degrees.",
    "Holiday requests go to your line manager.",
]


def _use_settings(data_dir: Path, child_process: bool) -> Settings:
    return load_settings(
        _env_file=None,
        data_dir=data_dir,
        embedding_provider="use",
        embedding_child_process=child_process,
        env="development",
    )


@pytest.fixture(scope="module")
def use_in_child(tmp_path_factory: pytest.TempPathFactory) -> PassageChildEmbedder:
    embedder = build_embedder(_use_settings(tmp_path_factory.mktemp("data"), True))
    assert isinstance(embedder, PassageChildEmbedder)
    return embedder


def test_passages_from_the_child_equal_the_in_process_vectors(
    use_in_child: PassageChildEmbedder, tmp_path: Path
) -> None:
    in_process = build_embedder(_use_settings(tmp_path, False))
    assert not isinstance(in_process, PassageChildEmbedder)

    from_child = np.array(use_in_child.embed_documents(PASSAGES))

    assert child_pid(use_in_child) not in (None, os.getpid())
    np.testing.assert_allclose(from_child, in_process.embed_documents(PASSAGES), atol=1e-6)
    assert use_in_child.model_id == in_process.model_id
    assert use_in_child.embed_query("who approves holidays") == in_process.embed_query(
        "who approves holidays"
    )


def test_a_process_that_runs_jobs_starts_its_child_at_start_up(tmp_path: Path) -> None:
    # The API process with the threads job backend runs the ingestion jobs: its first upload
    # must not wait for the child to load the model. The same settings with the child off
    # start nothing.
    container = Container(_use_settings(tmp_path / "on", True))
    embedder = container.embedder
    assert isinstance(embedder, PassageChildEmbedder)
    embedder.close()  # the model is cached per process: an earlier test may have started it
    assert child_pid(embedder) is None

    container.warm_up(serving=True)

    assert child_pid(embedder) is not None

    off = Container(_use_settings(tmp_path / "off", False))
    off.warm_up(serving=True)
    assert not isinstance(off.embedder, PassageChildEmbedder)


def test_a_worker_holds_the_model_only_in_its_child(tmp_path: Path) -> None:
    # A worker embeds passages, never questions: its model identity and dimension come from
    # the child, and the model is not loaded a second time in the worker itself.
    settings = _use_settings(tmp_path / "worker", True).model_copy(update={"embedding_threads": 3})
    worker = Container(settings)  # another embedding key: not the model cached by other tests
    embedder = worker.embedder
    assert isinstance(embedder, PassageChildEmbedder)
    try:
        worker.warm_up(serving=False)
        in_process = build_embedder(_use_settings(tmp_path / "api", False))

        assert child_pid(embedder) is not None and not local_model_loaded(embedder)
        assert (embedder.model_id, embedder.dimension) == (
            in_process.model_id,
            in_process.dimension,
        )
        vectors = embedder.embed_documents(PASSAGES)
        np.testing.assert_allclose(vectors, in_process.embed_documents(PASSAGES), atol=1e-6)
        assert not local_model_loaded(embedder)
        # A question (the API's work) loads it here after all.
        embedder.embed_query("who approves holidays")
        assert local_model_loaded(embedder)
    finally:
        embedder.close()


def test_a_killed_child_is_replaced_and_the_batch_still_embedded(
    use_in_child: PassageChildEmbedder,
) -> None:
    expected = use_in_child.embed_documents(PASSAGES)
    killed = child_pid(use_in_child)
    assert killed is not None
    os.kill(killed, signal.SIGKILL)

    again = use_in_child.embed_documents(PASSAGES)

    assert child_pid(use_in_child) not in (None, killed)
    np.testing.assert_allclose(again, expected, atol=1e-6)


def test_an_empty_batch_starts_no_child() -> None:
    embedder = PassageChildEmbedder(_fake_model, "unused")

    assert embedder.embed_documents([]) == []
    assert child_pid(embedder) is None


class _BrokenModel(FakeEmbedder):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise ValueError(f"cannot embed {len(texts)} passages")


def _fake_model(key: object) -> Embedder:
    return FakeEmbedder()


def _broken_model(key: object) -> Embedder:
    return _BrokenModel()


def test_a_model_error_in_the_child_reaches_the_caller_and_the_child_lives_on() -> None:
    embedder = PassageChildEmbedder(_broken_model, "unused")
    try:
        with pytest.raises(PassageChildError, match="ValueError: cannot embed 2 passages"):
            embedder.embed_documents(["one", "two"])
        pid = child_pid(embedder)
        with pytest.raises(PassageChildError):
            embedder.embed_documents(["three"])
        assert child_pid(embedder) == pid
    finally:
        embedder.close()
    assert child_pid(embedder) is None


def test_a_child_that_cannot_start_its_model_is_reported_after_one_retry() -> None:
    embedder = PassageChildEmbedder(_model_that_cannot_load, "unused")

    with pytest.raises(PassageChildError, match="failed twice"):
        embedder.embed_documents(["one"])
    assert child_pid(embedder) is None


def _model_that_cannot_load(key: object) -> Embedder:
    raise SystemExit(3)
