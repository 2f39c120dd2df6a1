"""The streamed response of an admitted answer, shared by /query/stream, conversations and
chat completions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from fastapi.responses import StreamingResponse
from starlette.types import Send

EVENT_STREAM = "text/event-stream"  # the media type of server-sent events


class ClosableEvents(Protocol):
    """The events of an admitted answer (an `AnswerStream`, or a stream wrapping one)."""

    def __aiter__(self) -> AsyncIterator[Any]: ...

    async def aclose(self) -> None: ...


class AnswerStreamResponse(StreamingResponse):
    """Server-sent bytes of an admitted answer; the answer is closed however the response ends
    (done, error, or the client hanging up), which stops the model and frees its slots."""

    def __init__(self, events: ClosableEvents, body: AsyncIterator[bytes]) -> None:
        super().__init__(
            body,
            media_type=EVENT_STREAM,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._events = events

    async def stream_response(self, send: Send) -> None:
        """Send the body, then close the answer even when cancelled by a disconnect."""
        try:
            await super().stream_response(send)
        finally:
            await self._events.aclose()
