"""LLM servers as child processes on free ports, for the provider tests: llama-cpp-python's
OpenAI-compatible server on the shipped GGUF, and the Ollama stand-in (`ollama_standin`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.config import Settings
from app.generation.grounded_answer import AnswerEvent, stream_answer
from app.providers.gguf import ensure_default_model
from app.providers.llms import build_llm
from tests.generation.generation_builders import PARIS, relevant

ROOT = Path(__file__).resolve().parents[2]
SERVED_MODEL = "qwen2.5-coder-1.5b"  # the alias the llama.cpp server answers to
API_KEY = "sk-local-test-key-4f1c"
READY_TIMEOUT_S = 300.0  # loading the GGUF on a busy 2-core machine
MEAN = 1  # llama.cpp's LLAMA_POOLING_TYPE_MEAN


def stream_over_paris(settings: Settings, question: str) -> Iterator[AnswerEvent]:
    """The answer events of the configured LLM to `question` over the Paris passages."""
    return stream_answer(
        question, relevant(PARIS), build_llm(settings), refusal_text=settings.refusal_text
    )


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    """A server running in its own process group, and where its output goes."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def root_url(self) -> str:
        """`http://127.0.0.1:PORT`."""
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """SIGKILL, as when the server crashes or its machine goes away."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit within 10 s."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self) -> str:
        """The end of the server's output, for failure messages."""
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


def _start(
    command: list[str], port: int, log: Path, ready_path: str, headers: dict[str, str]
) -> ServerProcess:
    with log.open("wb") as output:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed as a whole
        )
    server = ServerProcess(process, port, log)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"{command[2]} exited with {process.returncode}:\n{server.log_tail()}"
            )
        try:
            if (
                httpx.get(server.root_url + ready_path, headers=headers, timeout=2).status_code
                == 200
            ):
                return server
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            server.kill()
            raise RuntimeError(
                f"{command[2]} not ready after {READY_TIMEOUT_S:g} s:\n{server.log_tail()}"
            )
        time.sleep(0.3)


def start_llama_server(
    log_dir: Path, *, api_key: str = API_KEY, embedding: bool = False
) -> ServerProcess:
    """`python -m llama_cpp.server` on the shipped GGUF (assembled if needed), answering to
    SERVED_MODEL and requiring `api_key`; returns once `/v1/models` answers. With `embedding`
    it serves `/v1/embeddings` instead of chat: one vector per text, the mean of its tokens'
    (the GGUF names no pooling of its own, which would give a vector per token)."""
    model = ensure_default_model(ROOT / "models")
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        SERVED_MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        # One thread: on a shared 2-core machine two spinning threads were 4x slower.
        "--n_threads",
        "1",
        "--api_key",
        api_key,
    ]
    if embedding:
        command += ["--embedding", "true", "--kv_overrides", f"qwen2.pooling_type=int:{MEAN}"]
    headers = {"Authorization": f"Bearer {api_key}"}
    return _start(command, port, log_dir / f"llama-server-{port}.log", "/v1/models", headers)


def start_ollama_standin(
    log_dir: Path,
    *,
    relay: ServerProcess | None = None,
    scripts: dict[str, str] | None = None,
    pause_s: float = 0.0,
) -> ServerProcess:
    """The Ollama stand-in, relaying to `relay` (a llama.cpp server) and serving `scripts`."""
    port = free_port()
    command = [sys.executable, "-m", "tests.providers.ollama_standin", "--port", str(port)]
    if relay is not None:
        command += ["--relay", relay.root_url + "/v1", "--relay-key", API_KEY]
    for model, text in (scripts or {}).items():
        command += ["--script", f"{model}={text}"]
    command += ["--pause", str(pause_s)]
    return _start(command, port, log_dir / f"ollama-standin-{port}.log", "/api/tags", {})
