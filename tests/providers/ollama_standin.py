"""A local stand-in for an Ollama server, for the `ollama` provider's tests.

No Ollama server can run here: it is a Go program distributed as a binary from its own site,
and neither PyPI (only the `ollama` client library) nor Debian ships it. This child process
speaks the part of Ollama's HTTP API the provider uses, as Ollama documents it:

- `POST /api/chat` with `"stream": true`: NDJSON lines `{"model", "created_at", "message":
  {"role": "assistant", "content"}, "done": false}`, then one `"done": true` line with
  `done_reason` and the duration and token counts (`prompt_eval_count`, `eval_count`);
- an unknown model: HTTP 404 with `{"error": "model \\"x\\" not found, try pulling it first"}`;
- `POST /api/embed` with `{"model", "input"}` (one text or a list): `{"model", "embeddings"}`,
  one unit-length vector per input, as Ollama normalises them;
- `GET /api/tags` (the models it has) and `GET /api/version`.

Each model either relays to a real model behind an OpenAI-compatible server (llama.cpp's, with
the shipped GGUF: a real answer in Ollama's wire format) or streams a scripted reply word by
word with a pause (a slow generation, to time out or to be killed mid-answer). Embeddings are
relayed to the server's `/embeddings`, so the relay must be an embedding server for them.

    python -m tests.providers.ollama_standin --port N [--relay URL --relay-key K]
        [--script MODEL=TEXT] [--pause S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

RELAYED_MODEL = "qwen2.5-coder:1.5b"  # the name Ollama's library gives the shipped model


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _line(payload: dict[str, Any]) -> bytes:
    return (json.dumps(payload, ensure_ascii=False) + "\n").encode("utf-8")


class StandIn:
    """The models this stand-in serves and how each one produces its reply."""

    def __init__(
        self, relay: str | None, relay_key: str, scripts: dict[str, str], pause_s: float
    ) -> None:
        self.relay = relay
        self.relay_key = relay_key
        self.scripts = scripts
        self.pause_s = pause_s

    def models(self) -> list[str]:
        """Names `/api/tags` lists."""
        return [*([RELAYED_MODEL] if self.relay else []), *self.scripts]

    async def scripted(self, model: str, messages: list[dict[str, str]]) -> AsyncIterator[bytes]:
        """The scripted reply, one word per line, then the final line with counts."""
        started = time.monotonic_ns()
        words = self.scripts[model].split(" ")
        for index, word in enumerate(words):
            if index:
                await asyncio.sleep(self.pause_s)
            piece = word if index == 0 else " " + word
            yield _line(self._piece(model, piece))
        prompt_words = sum(len(m.get("content", "").split()) for m in messages)
        yield _line(self._done(model, "stop", started, prompt_words, len(words)))

    async def relayed(
        self, model: str, messages: list[dict[str, str]], options: dict[str, Any]
    ) -> AsyncIterator[bytes]:
        """The real model's reply from the OpenAI-compatible server, in Ollama's lines."""
        assert self.relay is not None
        started = time.monotonic_ns()
        headers = {"Authorization": f"Bearer {self.relay_key}"}
        body: dict[str, Any] = {"messages": messages, "stream": True}
        if "temperature" in options:
            body["temperature"] = options["temperature"]
        if "num_predict" in options:
            body["max_tokens"] = options["num_predict"]
        pieces = 0
        reason = "stop"
        async with (
            httpx.AsyncClient(headers=headers, timeout=None) as client,
            client.stream("POST", f"{self.relay}/chat/completions", json=body) as response,
        ):
            if response.status_code != 200:
                await response.aread()
                yield _line({"error": f"runner failed: HTTP {response.status_code}"})
                return
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                choice = json.loads(line[len("data: ") :])["choices"][0]
                text = choice["delta"].get("content")
                if text:
                    pieces += 1
                    yield _line(self._piece(model, text))
                if choice.get("finish_reason") == "length":
                    reason = "length"
            # Ollama counts the templated prompt; the contents' tokens are close enough here.
            counted = await client.post(
                f"{self.relay.removesuffix('/v1')}/extras/tokenize/count",
                json={"input": "\n".join(m["content"] for m in messages)},
            )
        prompt_tokens = int(counted.json()["count"]) if counted.status_code == 200 else 0
        yield _line(self._done(model, reason, started, prompt_tokens, pieces))

    async def embedded(self, texts: list[str]) -> list[list[float]]:
        """The real model's vectors from the OpenAI-compatible server, normalised."""
        assert self.relay is not None
        headers = {"Authorization": f"Bearer {self.relay_key}"}
        async with httpx.AsyncClient(headers=headers, timeout=None) as client:
            response = await client.post(
                f"{self.relay}/embeddings", json={"input": texts, "model": RELAYED_MODEL}
            )
        response.raise_for_status()
        data = sorted(response.json()["data"], key=lambda item: item["index"])
        vectors = np.array([item["embedding"] for item in data], dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.where(norms == 0, 1.0, norms)).tolist()

    @staticmethod
    def _piece(model: str, text: str) -> dict[str, Any]:
        return {
            "model": model,
            "created_at": _now(),
            "message": {"role": "assistant", "content": text},
            "done": False,
        }

    @staticmethod
    def _done(model: str, reason: str, started: int, prompt: int, generated: int) -> dict[str, Any]:
        total = time.monotonic_ns() - started
        return {
            "model": model,
            "created_at": _now(),
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": reason,
            "total_duration": total,
            "load_duration": 0,
            "prompt_eval_count": prompt,
            "prompt_eval_duration": total // 2,
            "eval_count": generated,
            "eval_duration": total // 2,
        }


def build_app(standin: StandIn) -> Starlette:
    """The HTTP routes of the stand-in."""

    async def chat(request: Request) -> Response:
        body = await request.json()
        model = body.get("model", "")
        if model not in standin.models():
            return JSONResponse(
                {"error": f'model "{model}" not found, try pulling it first'}, status_code=404
            )
        messages = body.get("messages", [])
        if body.get("stream", True) is not True:
            return JSONResponse({"error": "the stand-in only streams"}, status_code=400)
        if model in standin.scripts:
            lines = standin.scripted(model, messages)
        else:
            lines = standin.relayed(model, messages, body.get("options") or {})
        return StreamingResponse(lines, media_type="application/x-ndjson")

    async def embed(request: Request) -> Response:
        body = await request.json()
        model = body.get("model", "")
        if model != RELAYED_MODEL or standin.relay is None:
            return JSONResponse(
                {"error": f'model "{model}" not found, try pulling it first'}, status_code=404
            )
        given = body.get("input", "")
        texts = [given] if isinstance(given, str) else list(given)
        vectors = await standin.embedded(texts) if texts else []
        return JSONResponse({"model": model, "embeddings": vectors})

    async def tags(request: Request) -> Response:
        return JSONResponse(
            {"models": [{"name": name, "model": name} for name in standin.models()]}
        )

    async def version(request: Request) -> Response:
        return JSONResponse({"version": "0.0.0-standin"})

    return Starlette(
        routes=[
            Route("/api/chat", chat, methods=["POST"]),
            Route("/api/embed", embed, methods=["POST"]),
            Route("/api/tags", tags),
            Route("/api/version", version),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--relay", help="base URL of an OpenAI-compatible server (…/v1)")
    parser.add_argument("--relay-key", default="")
    parser.add_argument("--script", action="append", default=[], help="MODEL=TEXT")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between words")
    args = parser.parse_args()
    scripts = dict(item.split("=", 1) for item in args.script)
    standin = StandIn(args.relay, args.relay_key, scripts, args.pause)
    uvicorn.run(build_app(standin), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
