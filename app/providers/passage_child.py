"""Passages embedded in a child process, questions in this one.

The local models (`use`, `e5`) are Python code around numpy or a C engine: while one embeds a
batch of passages it takes the GIL back between every operation, so in the process that also
serves requests an upload's embedding and the requests slow each other down (a Python thread
spinning beside `use` doubles its time here, bench/README.md "Ingestion"). A child process
has its own GIL: it embeds the passages of uploads and reindexing on the other core while this
process answers requests and embeds questions itself (one short text, no round trip).

The child is started by `start_child` (a process that runs ingestion jobs calls it at start-up)
or else by the first passage batch, from the same builder and key as the local model, so both
produce the same vectors. Batches go to it one at a time; if it dies (killed,
out of memory) the batch is sent once more to a new child, and a second failure is raised to the
caller (the ingestion job fails with it and can be retried).

The model in this process is loaded only when a question is embedded: a worker, which embeds
none, holds the model once, in its child (about 140 MB less for `use`), and takes the model's
identity and dimension from the child's first message.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.process
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from app.child_process import stop_child
from app.providers.types import Embedder

log = logging.getLogger(__name__)

_CONTEXT = multiprocessing.get_context("forkserver")
_STOP_GRACE_S = 5.0


class PassageChildError(RuntimeError):
    """The embedding child failed a batch twice (or reported an error)."""


def _serve(
    connection: multiprocessing.connection.Connection, build: Callable[..., Embedder], key: Any
) -> None:
    """The child: build the model, say what it is, then embed each batch received until the
    pipe closes."""
    embedder = build(key)
    connection.send(("ready", (embedder.model_id, embedder.dimension)))
    while True:
        try:
            texts = connection.recv()
        except (EOFError, OSError):
            return  # the parent closed the pipe or exited
        try:
            vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
            connection.send(("ok", vectors))
        except Exception as exc:  # reported to the parent, which raises it
            connection.send(("error", f"{type(exc).__name__}: {exc}"))


class PassageChildEmbedder:
    """Passages through a child running `build(key)`; questions by `build(key)` in this process,
    loaded at the first question."""

    def __init__(self, build: Callable[..., Embedder], key: Any) -> None:
        self._build = build
        self._key = key
        self._local: Embedder | None = None
        self._local_lock = threading.Lock()
        self._identity: tuple[str, int] | None = None  # (model id, dimension), from either model
        self._lock = threading.Lock()  # the child: one batch at a time
        self._process: multiprocessing.process.BaseProcess | None = None
        self._connection: multiprocessing.connection.Connection | None = None
        self._ready_unread = False  # the running child's first message is still in the pipe

    @property
    def model_id(self) -> str:
        return self._model_identity()[0]

    @property
    def dimension(self) -> int:
        return self._model_identity()[1]

    def start_child(self) -> None:
        """Start the child now (it loads the model while this process goes on) instead of at
        the first batch."""
        with self._lock:
            self._ensure_started()

    def embed_query(self, text: str) -> list[float]:
        """A question: embedded in this process (one text, faster than a round trip)."""
        return self._local_model().embed_query(text)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Questions, several at once: in this process too."""
        return self._local_model().embed_queries(texts)

    def _local_model(self) -> Embedder:
        with self._local_lock:
            if self._local is None:
                self._local = self._build(self._key)
                self._identity = (self._local.model_id, self._local.dimension)
            return self._local

    def _model_identity(self) -> tuple[str, int]:
        """(model id, dimension): the loaded model's here, else the child's (started if need
        be; a child that cannot load the model is retried once, like a batch)."""
        if self._identity is None:
            with self._lock:
                self._with_retry(self._ensure_ready)
        assert self._identity is not None
        return self._identity

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Passages, embedded by the child; one retry on a new child if it died."""
        if not texts:
            return []
        with self._lock:
            status, payload = self._with_retry(lambda: self._round_trip(texts))
        if status != "ok":
            raise PassageChildError(f"embedding child: {payload}")
        vectors: list[list[float]] = payload.tolist()
        return vectors

    def _with_retry(self, talk: Callable[[], Any]) -> Any:
        """`talk` to the child; once more with a new child if it died (the lock is held)."""
        for attempt in (1, 2):
            try:
                return talk()
            except (EOFError, OSError) as exc:  # the child died (BrokenPipeError included)
                exit_code = self._stop()
                if attempt == 2:
                    raise PassageChildError(
                        f"embedding child failed twice (exit code {exit_code}): {exc!r}"
                    ) from exc
                log.warning(
                    "embedding child failed (%r, exit code %s); starting a new one", exc, exit_code
                )
        raise AssertionError("unreachable")

    def _ensure_started(self) -> None:
        if self._process is None or not self._process.is_alive():
            self._start()

    def _ensure_ready(self) -> None:
        """A running child whose first message (the model's identity) has been read."""
        self._ensure_started()
        if self._ready_unread:
            assert self._connection is not None
            _, (model_id, dimension) = self._connection.recv()
            self._ready_unread = False
            self._identity = self._identity or (str(model_id), int(dimension))

    def _round_trip(self, texts: list[str]) -> tuple[str, Any]:
        self._ensure_ready()
        assert self._connection is not None
        self._connection.send(texts)
        reply: tuple[str, Any] = self._connection.recv()
        return reply

    def _start(self) -> None:
        self._stop()
        parent_end, child_end = _CONTEXT.Pipe()
        process = _CONTEXT.Process(
            target=_serve,
            args=(child_end, self._build, self._key),
            daemon=True,
            name="rag-embed",
        )
        process.start()
        child_end.close()
        self._process, self._connection = process, parent_end
        self._ready_unread = True

    def _stop(self) -> int | None:
        """Stop the child if there is one; its exit code."""
        self._ready_unread = False
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        process, self._process = self._process, None
        if process is None:
            return None
        if process.is_alive():
            stop_child(process, _STOP_GRACE_S)
        process.join()
        return process.exitcode

    def close(self) -> None:
        """Stop the child (it is started again by the next batch)."""
        with self._lock:
            self._stop()
