"""Answers behind admission control, on threads of their own.

A question is first checked and looked up in the cache on the default threadpool (a hit needs
no model and is served at once). A miss then waits for an answer slot on the event loop (see
`admission`), and only an admitted answer runs retrieval and the model, on the lane's own
executor of `RAG_ANSWER_MAX_CONCURRENT` threads. So the default threadpool, which serves
/health, /auth/token and /search, never holds a thread waiting for the model.

A stream is also counted against the open-stream bounds, and its blocking event iterator is
stepped on the lane one event at a time. When the client goes away the iterator is closed as
soon as the step in progress returns: the model's generator closes, llama.cpp stops, the model
lock and both slots are released then, not at garbage collection.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio

from app.config import Settings
from app.services.blocks.admission import Bounds, ConcurrencyLimiter, Slot

Event = TypeVar("Event")  # what an answer stream yields (the answer service's events)
Step = Callable[..., Any]


@dataclass(frozen=True)
class LaneBounds:
    """The bounds of the answer limiter and of the open-stream limiter."""

    answers: Bounds
    streams: Bounds

    @classmethod
    def from_settings(cls, settings: Settings) -> LaneBounds:
        """RAG_ANSWER_MAX_CONCURRENT, _MAX_PER_TENANT, _MAX_PER_USER, RAG_ANSWER_QUEUE_SIZE,
        _QUEUE_PER_TENANT, _QUEUE_MAX_WAIT_S and RAG_STREAM_MAX_OPEN, _MAX_PER_TENANT and
        _MAX_PER_USER."""
        return cls(
            answers=Bounds(
                total=settings.answer_max_concurrent,
                per_tenant=settings.answer_max_per_tenant,
                per_user=settings.answer_max_per_user,
                queue_total=settings.answer_queue_size,
                queue_per_tenant=settings.answer_queue_per_tenant,
                max_wait_s=settings.answer_queue_max_wait_s,
            ),
            # An open stream never waits for a place: the stream limiter has no queue.
            streams=Bounds(
                total=settings.stream_max_open,
                per_tenant=settings.stream_max_per_tenant,
                per_user=settings.stream_max_per_user,
            ),
        )


class AnswerLane:
    """The answer and stream limiters of one API process and the threads answers run on."""

    def __init__(self, settings: Settings) -> None:
        bounds = LaneBounds.from_settings(settings)
        self.answers = ConcurrencyLimiter("answers", bounds.answers)
        self.streams = ConcurrencyLimiter("streams", bounds.streams)
        # One thread per answer slot: an admitted answer uses at most one at a time.
        self._executor = ThreadPoolExecutor(
            max_workers=settings.answer_max_concurrent, thread_name_prefix="llm-answer"
        )

    async def run(self, context: contextvars.Context, step: Step, *args: Any) -> Any:
        """`step(*args)` on a lane thread, in `context`.

        If the caller is cancelled meanwhile, this still waits for the thread to finish before
        re-raising, so whoever holds the slot never frees it while its work is running.
        """
        future: Future[Any] = self._executor.submit(context.run, step, *args)
        try:
            return await asyncio.wrap_future(future)
        except BaseException:
            if not future.done():  # cancelled while the step still runs
                with anyio.CancelScope(shield=True):
                    await _settled(future)
            raise

    def shutdown(self) -> None:
        """Stop taking work; queued steps are dropped (the process is stopping)."""
        self._executor.shutdown(wait=False, cancel_futures=True)


class AnswerStream(Generic[Event]):
    """The events of one answer as an async iterator that owns its slots.

    Closing it (at the end, on an error or because the client left) closes the blocking
    iterator on its thread, which stops the model, and then releases every slot; a stream
    that was never iterated releases them too.
    """

    def __init__(
        self,
        events: Iterator[Event],
        slots: list[Slot],
        run: Callable[..., Any],
    ) -> None:
        self._events = events
        self._slots = slots
        self._run = run
        self._closed = False
        self.answer_id = ""  # the answer's id, known before its first event

    def __aiter__(self) -> AnswerStream[Event]:
        return self

    async def __anext__(self) -> Event:
        if self._closed:
            raise StopAsyncIteration
        try:
            item: Event | None = await self._run(next, self._events, None)
        except BaseException:
            await self.aclose()
            raise
        if item is None:
            await self.aclose()
            raise StopAsyncIteration
        return item

    async def aclose(self) -> None:
        """Stop the answer and give back the slots (idempotent; safe while cancelled)."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            try:
                close = getattr(self._events, "close", None)
                if close is not None:
                    await self._run(close)
            finally:
                for slot in self._slots:
                    slot.release()


async def _settled(future: Future[Any]) -> None:
    """Wait until a lane step has ended, however it ended.

    Its outcome is marked as seen: the caller is already raising, and an asyncio future whose
    exception nobody reads is logged with its traceback ("Future exception was never
    retrieved") when it is collected, although the error was answered (a 503, say).
    """
    waiting = asyncio.wrap_future(future)
    await asyncio.wait([waiting])
    if not waiting.cancelled():
        waiting.exception()
