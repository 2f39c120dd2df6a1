"""The reranker factory: none, a real CrossEncoder loaded from a folder, loud failure otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import Settings
from app.errors import ConfigurationError
from app.providers.rerankers import build_reranker, local_model_dir
from app.providers.types import Reranker
from testkit.tiny_cross_encoder import save_tiny_cross_encoder

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"))


def test_none_means_no_reranker(settings: Settings) -> None:
    assert build_reranker(settings.model_copy(update={"reranker": "none"})) is None


def test_cross_encoder_loads_from_a_folder_and_scores_every_passage(
    settings: Settings, tiny_model: Path
) -> None:
    configured = settings.model_copy(
        update={"reranker": "cross-encoder", "reranker_model": str(tiny_model)}
    )
    reranker = build_reranker(configured)
    assert isinstance(reranker, Reranker)
    passages = [f"passage number {i} about the red handle" for i in range(7)]
    scores = reranker.score("what colour is the handle", passages)
    assert len(scores) == 7
    assert all(isinstance(s, float) for s in scores)
    # Deterministic: the same input scores the same, and order follows the input order.
    again = reranker.score("what colour is the handle", list(reversed(passages)))
    assert again == pytest.approx(list(reversed(scores)), abs=1e-5)
    assert reranker.score("q", []) == []


def test_batching_does_not_change_scores(settings: Settings, tiny_model: Path) -> None:
    base = {"reranker": "cross-encoder", "reranker_model": str(tiny_model)}
    one = build_reranker(settings.model_copy(update={**base, "reranker_batch_size": 1}))
    many = build_reranker(settings.model_copy(update={**base, "reranker_batch_size": 16}))
    assert one is not None and many is not None
    passages = ["short", "a much longer passage about the river and the city " * 5, "x"]
    assert one.score("river", passages) == pytest.approx(many.score("river", passages), abs=1e-4)


def test_passages_are_capped_in_length(settings: Settings, tiny_model: Path) -> None:
    base = {"reranker": "cross-encoder", "reranker_model": str(tiny_model)}
    capped = build_reranker(settings.model_copy(update={**base, "reranker_max_chars": 10}))
    assert capped is not None
    # Text beyond the cap must not influence the score.
    head = "red handle"
    assert capped.score("q", [head + " tail one"]) == pytest.approx(
        capped.score("q", [head + " other tail two"]), abs=1e-6
    )


def test_model_downloaded_into_models_dir_is_found_by_name(
    settings: Settings, tmp_path: Path
) -> None:
    name = "someone/tiny-reranker"
    save_tiny_cross_encoder(local_model_dir(tmp_path / "models", name))
    configured = settings.model_copy(
        update={
            "reranker": "cross-encoder",
            "reranker_model": name,
            "models_dir": tmp_path / "models",
        }
    )
    reranker = build_reranker(configured)
    assert reranker is not None and reranker.model_id == f"cross-encoder:{name}"


def test_missing_model_fails_at_startup_naming_setting_and_script(
    settings: Settings, tmp_path: Path
) -> None:
    configured = settings.model_copy(
        update={
            "reranker": "cross-encoder",
            "reranker_model": "cross-encoder/not-downloaded-anywhere",
            "models_dir": tmp_path / "models",
        }
    )
    with pytest.raises(ConfigurationError) as info:
        build_reranker(configured)
    message = str(info.value)
    assert "RAG_RERANKER" in message
    assert "RAG_RERANKER_MODEL" in message
    assert "python scripts/download_models.py" in message


def test_broken_model_folder_fails_loudly(settings: Settings, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    configured = settings.model_copy(
        update={"reranker": "cross-encoder", "reranker_model": str(broken)}
    )
    with pytest.raises(ConfigurationError, match="RAG_RERANKER_MODEL"):
        build_reranker(configured)
