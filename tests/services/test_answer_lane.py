"""The answer lane: blocking steps on its own threads, and a stream that frees its slots and
closes its blocking iterator however it ends. Threads are gated with events, not sleeps."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import load_settings
from app.errors import ProviderUnavailable
from app.services.blocks.admission import Bounds, Caller
from app.services.blocks.answer_lane import AnswerLane, AnswerStream

pytestmark = pytest.mark.unit

CALLER = Caller("tenant", "user")


def _lane(tmp_path: Path) -> AnswerLane:
    settings = load_settings(
        _env_file=None, data_dir=tmp_path, answer_max_concurrent=2, answer_max_per_tenant=2
    )
    return AnswerLane(settings)


def test_each_limiter_is_bounded_by_its_own_settings(tmp_path: Path) -> None:
    settings = load_settings(
        _env_file=None,
        data_dir=tmp_path,
        answer_max_concurrent=7,
        answer_max_per_tenant=5,
        answer_max_per_user=3,
        answer_queue_size=11,
        answer_queue_per_tenant=9,
        answer_queue_max_wait_s=2.5,
        stream_max_open=13,
        stream_max_per_tenant=6,
        stream_max_per_user=4,
    )
    lane = AnswerLane(settings)
    assert (lane.answers.name, lane.answers.bounds) == ("answers", Bounds(7, 5, 3, 11, 9, 2.5))
    # An open stream never queues: a full stream bound refuses at once.
    assert (lane.streams.name, lane.streams.bounds) == ("streams", Bounds(13, 6, 4))
    lane.shutdown()


def test_steps_run_on_the_lane_threads_in_the_given_context(tmp_path: Path) -> None:
    lane = _lane(tmp_path)
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="none")

    def step() -> tuple[str, str]:
        return threading.current_thread().name, marker.get()

    async def scenario() -> tuple[str, str]:
        context = contextvars.copy_context()
        context.run(marker.set, "request-7")
        result: tuple[str, str] = await lane.run(context, step)
        return result

    name, seen = asyncio.run(scenario())
    assert name.startswith("llm-answer") and seen == "request-7"
    lane.shutdown()


def test_a_cancelled_caller_waits_for_its_running_step_before_giving_up(tmp_path: Path) -> None:
    lane = _lane(tmp_path)
    entered, gate = threading.Event(), threading.Event()

    def step() -> None:
        entered.set()
        gate.wait(timeout=30)

    async def scenario() -> None:
        task = asyncio.ensure_future(lane.run(contextvars.copy_context(), step))
        await asyncio.get_running_loop().run_in_executor(None, entered.wait, 30)
        task.cancel()
        for _ in range(10):
            await asyncio.sleep(0)
        assert not task.done(), "the caller gave up while its step still ran"
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 30)

    asyncio.run(scenario())
    lane.shutdown()


def test_a_stream_closed_before_its_first_event_frees_its_slots_and_its_iterator(
    tmp_path: Path,
) -> None:
    lane = _lane(tmp_path)
    closed = threading.Event()

    def events() -> Iterator[tuple[str, dict[str, object]]]:
        try:
            yield "token", {"text": "never read"}
        finally:
            closed.set()

    async def scenario() -> None:
        slots = [await lane.streams.acquire(CALLER), await lane.answers.acquire(CALLER)]
        context = contextvars.copy_context()
        iterator = events()
        next(iterator)  # suspended inside, as a stream is between events

        async def on_lane(step: object, *args: object) -> object:
            return await lane.run(context, step, *args)  # type: ignore[arg-type]

        stream = AnswerStream(iterator, slots, on_lane)
        await stream.aclose()
        await stream.aclose()  # idempotent
        assert lane.streams.running == 0 and lane.answers.running == 0
        assert [s.released for s in slots] == [True, True]
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()

    asyncio.run(scenario())
    assert closed.is_set()
    lane.shutdown()


def test_a_stream_that_ends_frees_its_slots(tmp_path: Path) -> None:
    lane = _lane(tmp_path)

    async def scenario() -> list[str]:
        slots = [await lane.answers.acquire(CALLER)]
        context = contextvars.copy_context()
        items = iter([("token", {"text": "a"}), ("done", {})])

        async def on_lane(step: object, *args: object) -> object:
            return await lane.run(context, step, *args)  # type: ignore[arg-type]

        seen = [event async for event, _ in AnswerStream(items, slots, on_lane)]
        assert lane.answers.running == 0
        return seen

    assert asyncio.run(scenario()) == ["token", "done"]
    lane.shutdown()


def _unretrieved_future_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    gc.collect()  # an unread future's exception is logged when the future is collected
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "asyncio" and "never retrieved" in record.getMessage()
    ]


def test_a_failed_step_is_not_logged_again_as_an_unretrieved_future(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The model server being down answers 503; the log must not add an asyncio traceback.
    lane = _lane(tmp_path)

    def step() -> None:
        raise ProviderUnavailable("the LLM server is unreachable")

    async def scenario() -> None:
        with pytest.raises(ProviderUnavailable):
            await lane.run(contextvars.copy_context(), step)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(scenario())
        assert _unretrieved_future_errors(caplog) == []
    lane.shutdown()


def test_a_step_failing_after_its_caller_was_cancelled_is_not_logged_as_unretrieved(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lane = _lane(tmp_path)
    entered, gate = threading.Event(), threading.Event()

    def step() -> None:
        entered.set()
        gate.wait(timeout=30)
        raise ProviderUnavailable("the LLM server went away")

    async def scenario() -> None:
        task = asyncio.ensure_future(lane.run(contextvars.copy_context(), step))
        await asyncio.get_running_loop().run_in_executor(None, entered.wait, 30)
        task.cancel()
        await asyncio.sleep(0)
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 30)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(scenario())
        assert _unretrieved_future_errors(caplog) == []
    lane.shutdown()
