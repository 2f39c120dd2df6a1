"""A scripted OpenAI-compatible chat server on a loopback port: each /v1/chat/completions
request is answered with what a Python function says for its messages, streamed as the OpenAI
API streams (`chat.completion.chunk` events, usage, `[DONE]`) or as one JSON body.

The service reaches it with RAG_LLM_PROVIDER=openai and RAG_OPENAI_BASE_URL, over real HTTP,
through the same client a hosted model is called with.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from testkit.http_peer import QuietHandler, serving_handler

Reply = Callable[[list[dict[str, str]]], str]


def _handler(reply: Reply) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            text = reply(body["messages"])
            if body.get("stream"):
                self._stream(body["model"], text)
            else:
                self._send("application/json", json.dumps(_completion(body["model"], text)))

        def _stream(self, model: str, text: str) -> None:
            head = {"id": "chatcmpl-scripted", "created": 0, "model": model}
            events: list[dict[str, Any]] = [
                {**head, "object": "chat.completion.chunk", "choices": [_choice(text, None)]},
                {**head, "object": "chat.completion.chunk", "choices": [_choice("", "stop")]},
                {
                    **head,
                    "object": "chat.completion.chunk",
                    "choices": [],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                },
            ]
            lines = [f"data: {json.dumps(event)}\n\n" for event in events] + ["data: [DONE]\n\n"]
            self._send("text/event-stream", "".join(lines))

        def _send(self, content_type: str, payload: str) -> None:
            self.send_body(200, content_type, payload.encode())

    return Handler


def _choice(text: str, finish: str | None) -> dict[str, Any]:
    delta = {"role": "assistant", "content": text} if text else {}
    return {"index": 0, "delta": delta, "finish_reason": finish}


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


@contextmanager
def scripted_openai(reply: Reply) -> Iterator[str]:
    """Serve `reply` while the block runs; yields the base URL (ending in /v1)."""
    with serving_handler(_handler(reply)) as server:
        yield f"http://127.0.0.1:{server.server_port}/v1"
