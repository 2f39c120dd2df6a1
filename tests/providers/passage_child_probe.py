"""What a test reads of a PassageChildEmbedder's state that the service itself never needs:
its child's process id and whether this process loaded the model too."""

from __future__ import annotations

from app.providers.passage_child import PassageChildEmbedder


def child_pid(embedder: PassageChildEmbedder) -> int | None:
    """The running child's process id (None before the first batch or after close)."""
    process = embedder._process
    return process.pid if process is not None else None


def local_model_loaded(embedder: PassageChildEmbedder) -> bool:
    """Whether this process holds the model too (it has embedded a question)."""
    return embedder._local is not None
