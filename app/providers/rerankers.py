"""Reranker providers: the only module that names sentence-transformers' `CrossEncoder`.

`build_reranker(settings)` returns None for `RAG_RERANKER=none`, or a loaded cross-encoder. The
model is never downloaded at run time: it is read from a local folder (`RAG_RERANKER_MODEL` as a
path, or `RAG_MODELS_DIR/rerankers/<name>` as written by `scripts/download_models.py`, or the
Hugging Face cache). If it cannot be loaded, building fails loudly; reranking is never skipped
silently.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from app.config import ENV_PREFIX
from app.errors import ConfigurationError

if TYPE_CHECKING:
    from app.config import Settings
    from app.providers.types import Reranker

DOWNLOAD_HINT = "python scripts/download_models.py"


def local_model_dir(models_dir: Path, name: str) -> Path:
    """Where the download script stores the reranker called `name`."""
    return models_dir / "rerankers" / name.replace("/", "__")


def resolve_model_location(name: str, models_dir: Path) -> str:
    """A local folder for the model if one exists, else the name (Hugging Face cache lookup)."""
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser())
    downloaded = local_model_dir(models_dir, name)
    return str(downloaded) if downloaded.is_dir() else name


class CrossEncoderReranker:
    """Scores (question, passage) pairs with a cross-encoder, in batches, passages capped."""

    def __init__(self, model: Any, model_id: str, batch_size: int, max_chars: int) -> None:
        self._model = model
        self._model_id = model_id
        self._batch_size = batch_size
        self._max_chars = max_chars
        # Two concurrent forward passes on two cores only slow each other down.
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One relevance score per passage, in input order (higher is more relevant)."""
        if not passages:
            return []
        pairs = [(query, passage[: self._max_chars]) for passage in passages]
        with self._lock:
            scores = self._model.predict(
                pairs, batch_size=self._batch_size, show_progress_bar=False
            )
        return [float(s) for s in scores]


class _RerankerKey(NamedTuple):
    provider: str
    model: str
    models_dir: Path
    batch_size: int
    max_chars: int


def build_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker, loaded once per process; None when `RAG_RERANKER=none`."""
    if settings.reranker == "none":
        return None
    key = _RerankerKey(
        settings.reranker,
        settings.reranker_model.strip(),
        settings.models_dir,
        settings.reranker_batch_size,
        settings.reranker_max_chars,
    )
    return _cached_reranker(key)


@lru_cache(maxsize=4)
def _cached_reranker(key: _RerankerKey) -> Reranker:
    if key.provider != "cross-encoder":
        raise ConfigurationError(
            f"{ENV_PREFIX}RERANKER: unknown reranker {key.provider!r}; "
            "expected 'none' or 'cross-encoder'"
        )
    if not key.model:
        raise ConfigurationError(
            f"{ENV_PREFIX}RERANKER=cross-encoder needs {ENV_PREFIX}RERANKER_MODEL (name or folder)"
        )
    location = resolve_model_location(key.model, key.models_dir)
    try:
        from sentence_transformers import CrossEncoder

        # local_files_only: a missing model must fail now, not hang retrying a hub download.
        model = CrossEncoder(location, device="cpu", local_files_only=True)
    except Exception as exc:
        raise ConfigurationError(
            f"{ENV_PREFIX}RERANKER=cross-encoder but {ENV_PREFIX}RERANKER_MODEL={key.model!r} "
            f"could not be loaded from {location!r} ({type(exc).__name__}: {exc}). Run "
            f"`{DOWNLOAD_HINT}` where the internet is reachable (it saves the model under "
            f"{local_model_dir(key.models_dir, key.model)}), set {ENV_PREFIX}RERANKER_MODEL to a "
            f"local model folder, or set {ENV_PREFIX}RERANKER=none to run without reranking."
        ) from exc
    return CrossEncoderReranker(model, f"cross-encoder:{key.model}", key.batch_size, key.max_chars)
