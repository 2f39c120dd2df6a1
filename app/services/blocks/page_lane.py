"""Page pictures behind admission control, on threads of their own.

A picture request never holds a thread of the default threadpool, which serves /health,
/auth/token and /search for every tenant. Its checks and cache reads (milliseconds) run on a
small lookup executor; a picture that must be drawn then waits for a render slot on the event
loop, for at most `RAG_PAGE_RENDER_MAX_WAIT_S` (then 429 or 503 with Retry-After), and is drawn
by a child process watched from one of the lane's `RAG_PAGE_RENDER_SLOTS` render threads.

One tenant (or user) holds at most half of the slots, so another tenant's picture always has
one; a page that failed or timed out is remembered (see `FailedPages`), so a repeated request
for it is refused at once instead of taking a slot again.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import anyio

from app.config import Settings
from app.services.blocks.admission import Bounds, ConcurrencyLimiter

T = TypeVar("T")

_LOOKUP_THREADS = 2
# Callers queued per render slot before more are refused at once.
_QUEUE_PER_SLOT = 2
# Before the lane has measured a render, a slot is assumed held this long (for Retry-After).
_TYPICAL_RENDER_S = 1.0


class PageLane:
    """The render limiter of one API process and the threads page pictures use."""

    def __init__(self, settings: Settings) -> None:
        slots = settings.page_render_slots
        own_share = max(1, slots // 2)
        queue = _QUEUE_PER_SLOT * slots
        self.renders = ConcurrencyLimiter(
            "page pictures",
            Bounds(
                total=slots,
                per_tenant=own_share,
                per_user=own_share,
                queue_total=queue,
                queue_per_tenant=max(1, queue // 2),
                max_wait_s=settings.page_render_max_wait_s,
            ),
            typical_hold_s=_TYPICAL_RENDER_S,
        )
        self._lookups = ThreadPoolExecutor(_LOOKUP_THREADS, thread_name_prefix="page-lookup")
        self._renders = ThreadPoolExecutor(slots, thread_name_prefix="page-render")

    async def look_up(self, step: Callable[..., T], *args: object) -> T:
        """`step(*args)` (checks and cache reads) on a lookup thread."""
        return await _on(self._lookups, step, *args)

    async def draw(self, step: Callable[..., T], *args: object) -> T:
        """`step(*args)` (a render) on a render thread; call it holding a render slot."""
        return await _on(self._renders, step, *args)

    def shutdown(self) -> None:
        """Stop taking work; queued steps are dropped (the process is stopping)."""
        for executor in (self._lookups, self._renders):
            executor.shutdown(wait=False, cancel_futures=True)


async def _on(executor: ThreadPoolExecutor, step: Callable[..., T], *args: object) -> T:
    """`step(*args)` on one of `executor`'s threads.

    Shielded: a client that leaves does not free the render slot while its child still runs
    (it ends within the render timeout); the request is cancelled once the step has returned.
    """
    future = executor.submit(contextvars.copy_context().run, step, *args)
    with anyio.CancelScope(shield=True):
        result = await asyncio.wrap_future(future)
    return result
