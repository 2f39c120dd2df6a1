"""LLM providers and the one factory that builds them from settings.

This is the only module that names an LLM library (llama-cpp-python, langchain-openai,
langchain-ollama); each is imported when its provider is built, so importing the app is cheap.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.config import LLM_PROVIDERS, Settings
from app.errors import ConfigurationError, GenerationTimeout, PromptTooLong, ProviderUnavailable
from app.providers.extractive import ExtractiveLLM
from app.providers.gguf import check_gguf_header, ensure_default_model
from app.providers.registry import ProviderRegistry
from app.providers.types import LLM, ChatMessage, ChatRequest, LLMDelta
from app.text.language import has_latin_letter, has_letter


@dataclass(frozen=True)
class RenderedPrompt:
    """A chat prompt rendered by the model's template: its text, its tokens, and the stop
    strings and stopping criteria the template adds (its end-of-turn token)."""

    text: str
    tokens: list[int]
    stop: list[str]
    stopping_criteria: Any  # a llama_cpp.StoppingCriteriaList, or None


def _template_formatter(llama: Any, template: str) -> Any:
    """The formatter llama-cpp-python builds for a GGUF's own chat template (`Llama.__init__`,
    same end and start texts, same stop token), so a prompt rendered with it is, token for
    token, the one `create_chat_completion` would have rendered and fed."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def text(token: int) -> str:
        return str(llama._model.token_get_text(token)) if token != -1 else ""

    eos = llama.token_eos()
    return Jinja2ChatFormatter(
        template=template,
        eos_token=text(eos),
        bos_token=text(llama.token_bos()),
        stop_token_ids=[eos],
    )


@dataclass
class _LocalModel:
    """One GGUF model per process, loaded on first use; its lock serialises generation."""

    resolve_path: Callable[[], Path]
    context_tokens: int
    threads: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    llama: Any = None
    formatter: Any = None
    _token_scripts: tuple[Any, Any] | None = None
    # Saved llama.cpp context states, each holding exactly one shared prompt prefix (the key),
    # most recently used last: the answer prompt's and, e.g., a follow-up rewrite prompt's.
    _prefix_states: OrderedDict[tuple[int, ...], bytes] = field(default_factory=OrderedDict)

    def loaded(self) -> Any:
        """The llama.cpp model, loading it now if needed (call with `lock` held)."""
        if self.llama is None:
            from llama_cpp import Llama

            path = self.resolve_path()
            self.llama = Llama(
                model_path=str(path),
                n_ctx=self.context_tokens,
                n_threads=self.threads,
                verbose=False,
            )
            template = self.llama.metadata.get("tokenizer.chat_template")
            if template:
                self.formatter = _template_formatter(self.llama, template)
        return self.llama

    def token_scripts(self) -> tuple[Any, Any]:
        """Two boolean arrays over the vocabulary: which tokens hold a Latin letter, and which
        hold any letter (call with `lock` held; computed once, ~1 s)."""
        if self._token_scripts is None:
            llama = self.loaded()
            pieces = [
                llama.detokenize([token]).decode("utf-8", "ignore")
                for token in range(llama.n_vocab())
            ]
            self._token_scripts = (
                np.array([has_latin_letter(piece) for piece in pieces]),
                np.array([has_letter(piece) for piece in pieces]),
            )
        return self._token_scripts

    def _tokens(self, prompt: str) -> list[int]:
        return list(self.llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))

    def render(self, messages: list[dict[str, str]]) -> RenderedPrompt | None:
        """The chat prompt as the model's own template renders it, rendered and tokenized once
        (call with `lock` held); None when the GGUF has no chat template."""
        if self.formatter is None:
            return None
        result = self.formatter(messages=messages)
        # As llama-cpp-python's chat handler tokenizes it (`chat_formatter_to_chat_completion_
        # handler`): a template that writes its own special tokens gets no extra BOS.
        tokens = self.llama.tokenize(
            result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True
        )
        stop = [result.stop] if isinstance(result.stop, str) else list(result.stop or ())
        return RenderedPrompt(result.prompt, list(tokens), stop, result.stopping_criteria)

    def shared_prefix_tokens(
        self, messages: list[dict[str, str]], shared: int, prompt: RenderedPrompt
    ) -> tuple[int, ...] | None:
        """The leading tokens of `prompt` that come from its first `shared` messages alone.

        The template renders the shared messages by themselves (plus its reply header); only
        the text both renderings share is kept, so no later message's content can be part of
        it. None when there is nothing to share or the tokenization differs at the border."""
        if self.formatter is None or not 0 < shared < len(messages):
            return None
        alone = self.formatter(messages=messages[:shared]).prompt
        prefix = self._tokens(_common_start(prompt.text, alone))
        if not prefix or prompt.tokens[: len(prefix)] != prefix:
            return None
        return tuple(prefix)

    def start_from_prefix(self, prefix: tuple[int, ...]) -> None:
        """Leave the context holding exactly `prefix`, evaluated from an empty context (call with
        `lock` held). The first time, the prefix is evaluated and its state saved; later, the
        saved state replaces whatever the context held (another tenant's answer, another
        prompt, a stream abandoned mid-way), so what follows is computed exactly as on a fresh
        model and nothing of an earlier request is reused."""
        import llama_cpp

        llama = self.loaded()
        context = llama._ctx.ctx
        state = self._prefix_states.get(prefix)
        if state is not None:
            buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
            if llama_cpp.llama_state_set_data(context, buffer, len(state)) == len(state):
                self._prefix_states.move_to_end(prefix)
                llama.input_ids[: len(prefix)] = prefix
                llama.n_tokens = len(prefix)
                llama._requires_eval = True  # the next decode recomputes the logits
                return
            del self._prefix_states[prefix]  # not restorable: evaluate it again below
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(context), True)
        llama.reset()
        llama.eval(list(prefix))
        size = llama_cpp.llama_state_get_size(context)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_get_data(context, buffer, size)
        self._prefix_states[prefix] = bytes(buffer)[:written]
        while len(self._prefix_states) > _MAX_PREFIX_STATES:
            self._prefix_states.popitem(last=False)


# Each saved prefix state is its tokens' KV cache (~28 KB per token for the default 1.5B model,
# ~8 MB for the answer prompt's rules and examples).
_MAX_PREFIX_STATES = 4


_LOCAL_MODELS: dict[tuple[str, int, int], _LocalModel] = {}
_LOCAL_MODELS_LOCK = threading.Lock()


def _shared_local_model(
    key_path: str, resolve_path: Callable[[], Path], context_tokens: int, threads: int
) -> _LocalModel:
    key = (key_path, context_tokens, threads)
    with _LOCAL_MODELS_LOCK:
        if key not in _LOCAL_MODELS:
            _LOCAL_MODELS[key] = _LocalModel(resolve_path, context_tokens, threads)
        return _LOCAL_MODELS[key]


def _common_start(first: str, second: str) -> str:
    """The longest text both strings start with."""
    length = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        length += 1
    return first[:length]


def _as_dicts(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def _first_token(llama: Any, text: str) -> int | None:
    tokens = llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    return int(tokens[0]) if tokens else None


class FirstTokenProbe:
    """A llama.cpp logits processor that records, at the first generated position, the
    probability of one token (the probe text's first token) and leaves the logits unchanged."""

    def __init__(self, token: int | None) -> None:
        self._token = token
        self.probability: float | None = None

    def __call__(self, input_ids: Any, logits: Any) -> Any:
        if self.probability is None and self._token is not None:
            shifted = np.asarray(logits, dtype=np.float64)
            shifted = np.exp(shifted - shifted.max())
            self.probability = float(shifted[self._token] / shifted.sum())
        return logits


class LatinStartMask:
    """A llama.cpp logits processor for `FirstTokenMask("latin")`: until the reply has produced
    its first letter, tokens holding a Latin letter are masked, except one allowed token. For
    Arabic questions: the small default model otherwise answered a quarter of the Arabic eval
    questions in English (see README); started in Arabic, 198 of 200 answers stayed Arabic."""

    def __init__(self, latin: Any, letters: Any, allowed: int | None) -> None:
        self._blocked = latin.copy()
        if allowed is not None:
            self._blocked[allowed] = False
        self._letters = letters
        self._started = False  # False until the first generated position has been masked
        self._done = False

    def __call__(self, input_ids: Any, logits: Any) -> Any:
        if self._done:
            return logits
        if not self._started:
            self._started = True
        elif self._letters[input_ids[-1]]:  # the token generated last
            self._done = True
            return logits
        logits[self._blocked] = -np.inf
        return logits


class LlamaCppLLM:
    """In-process llama.cpp generation; one answer at a time per process, with a deadline."""

    def __init__(
        self,
        model: _LocalModel,
        *,
        model_id: str,
        max_tokens: int,
        timeout_s: float,
        prefix_cache: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._model = model
        self._model_id = model_id
        self._max_tokens = max_tokens
        self._timeout_s = timeout_s
        self._prefix_cache = prefix_cache
        # What the answer's deadline is read from (a seam: tests pass a clock they move).
        self.clock = clock

    @property
    def model_id(self) -> str:
        return self._model_id

    def warm_up(self) -> None:
        """Assemble, verify and load the model now instead of on the first question."""
        with self._model.lock:
            self._model.loaded()

    def stream(self, request: ChatRequest) -> Iterator[LLMDelta]:
        """Stream the reply, waiting for the model lock and stopping at the deadline."""
        deadline = self.clock() + self._timeout_s
        if not self._model.lock.acquire(timeout=self._timeout_s):
            raise GenerationTimeout(
                f"the local model stayed busy with other answers for {self._timeout_s:g} s"
            )
        try:
            yield from self._generate(request, deadline)
        finally:
            self._model.lock.release()

    def _generate(self, request: ChatRequest, deadline: float) -> Iterator[LLMDelta]:
        llama = self._model.loaded()
        messages = _as_dicts(request.messages)
        prompt = self._model.render(messages)
        prompt_tokens = None if prompt is None else len(prompt.tokens)
        if prompt_tokens is not None and prompt_tokens >= self._model.context_tokens:
            # Refused before anything is evaluated: the saved prefix alone may not fit either.
            raise prompt_too_long(prompt_tokens, self._model.context_tokens)
        if self._prefix_cache and prompt is not None:
            prefix = self._model.shared_prefix_tokens(messages, request.shared_prefix, prompt)
            if prefix is not None:
                # llama.cpp then evaluates only the tokens after the prefix.
                self._model.start_from_prefix(prefix)
        processors: list[Callable[[Any, Any], Any]] = []
        probe = None
        if request.probe is not None:
            probe = FirstTokenProbe(_first_token(llama, request.probe))
            processors.append(probe)
        mask = request.first_token_mask
        if mask is not None:
            allowed = _first_token(llama, mask.allow)
            processors.append(LatinStartMask(*self._model.token_scripts(), allowed))
        options: dict[str, Any] = {
            "temperature": 0.0 if request.temperature is None else request.temperature,
            "max_tokens": self._max_tokens if request.max_tokens is None else request.max_tokens,
            "stream": True,
            "logits_processor": processors or None,
        }
        try:
            if prompt is None:  # no chat template in the GGUF: llama-cpp-python's fallback format
                chunks = llama.create_chat_completion(
                    messages=messages, stop=list(request.stop), **options
                )
            else:  # the prompt rendered above, fed as tokens: the template is not rendered again
                chunks = llama.create_completion(
                    prompt=prompt.tokens,
                    stop=[*request.stop, *prompt.stop],
                    stopping_criteria=prompt.stopping_criteria,
                    **options,
                )
            first = True
            for chunk in chunks:
                if self.clock() > deadline:
                    chunks.close()
                    raise GenerationTimeout(
                        f"the local model did not finish within {self._timeout_s:g} s"
                    )
                text = _chunk_text(chunk)
                if text:
                    if first:
                        probability = probe.probability if probe is not None else None
                        yield LLMDelta(text, prompt_tokens, probability)
                        first = False
                    else:
                        yield LLMDelta(text)
        except ValueError as exc:  # llama.cpp's "Requested tokens (n) exceed context window"
            if not _is_context_overflow(exc):
                raise
            raise prompt_too_long(prompt_tokens, self._model.context_tokens) from exc


def _chunk_text(chunk: dict[str, Any]) -> str | None:
    """The text of a streamed chat chunk (`delta.content`) or completion chunk (`text`); as
    llama-cpp-python's chat stream does, none from the last chunk (the finish reason)."""
    choice = chunk["choices"][0]
    if "delta" in choice:
        content: str | None = choice["delta"].get("content")
        return content
    text: str | None = None if choice.get("finish_reason") else choice["text"]
    return text


def prompt_too_long(prompt_tokens: int | None, context_tokens: int | None) -> PromptTooLong:
    """The 422 for a question that, with its passages, overflows the model's context."""
    needed = f" ({prompt_tokens} tokens)" if prompt_tokens else ""
    limit = f" of {context_tokens} tokens" if context_tokens else ""
    return PromptTooLong(
        f"the question and its passages{needed} exceed the language model's context window"
        f"{limit} (RAG_LLM_CONTEXT_TOKENS); ask a shorter question"
    )


def _is_context_overflow(exc: BaseException) -> bool:
    """Whether a server refused the request because the prompt exceeds its context."""
    text = str(exc).lower()
    return getattr(exc, "code", None) == "context_length_exceeded" or (
        "context" in text and ("length" in text or "window" in text or "exceed" in text)
    )


class ChatServerLLM:
    """A LangChain chat model talking to a server (OpenAI-compatible or Ollama).

    Failures keep the endpoint and the server's reply in the exception message, which goes to
    the logs only: clients see the error code and a generic text (`app.errors.public_message`).
    """

    def __init__(
        self,
        chat_model: Any,
        *,
        model_id: str,
        endpoint: str,
        unreachable: tuple[type[BaseException], ...],
        timeouts: tuple[type[BaseException], ...],
        rejected: tuple[type[BaseException], ...] = (),
        option_fields: tuple[str, str] = ("temperature", "max_tokens"),
        timeout_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._chat = chat_model
        # The chat model's field names for a request's temperature and max_tokens
        # ("extra_body": sent as the request body's `max_tokens`).
        self._option_fields = option_fields
        self._model_id = model_id
        self._endpoint = endpoint
        self._unreachable = unreachable
        self._timeouts = timeouts
        self._rejected = rejected  # the server refused this request (e.g. HTTP 400)
        # The client's own timeout bounds each read; this bounds the whole answer, as the
        # local model's deadline does (a server trickling tokens never trips a read timeout).
        self._timeout_s = timeout_s
        # What that deadline is read from (a seam: tests pass a clock they move).
        self.clock = clock

    @property
    def model_id(self) -> str:
        return self._model_id

    def _chat_for(self, request: ChatRequest) -> Any:
        """The chat model, copied with the request's temperature and max_tokens when it sets
        them (the configured model is shared by concurrent requests, so it is never changed)."""
        temperature_field, max_tokens_field = self._option_fields
        changes: dict[str, Any] = {}
        if request.temperature is not None:
            changes[temperature_field] = request.temperature
        if request.max_tokens is not None and max_tokens_field == "extra_body":
            extra = dict(getattr(self._chat, "extra_body", None) or {})
            changes["extra_body"] = {**extra, "max_tokens": request.max_tokens}
        elif request.max_tokens is not None:
            changes[max_tokens_field] = request.max_tokens
        return self._chat.model_copy(update=changes) if changes else self._chat

    def stream(self, request: ChatRequest) -> Iterator[LLMDelta]:
        """Stream from the server, turning connection failures into ProviderUnavailable."""
        messages = [(m.role, m.content) for m in request.messages]
        stop = list(request.stop) or None
        deadline = None if self._timeout_s is None else self.clock() + self._timeout_s
        try:
            chunks = self._chat_for(request).stream(messages, stop=stop)
            for chunk in chunks:
                if deadline is not None and self.clock() > deadline:
                    close = getattr(chunks, "close", None)
                    if close is not None:
                        close()  # ends the HTTP response, so the server stops generating
                    raise GenerationTimeout(
                        f"{self._model_id} at {self._endpoint} did not finish within "
                        f"{self._timeout_s:g} s"
                    )
                usage = getattr(chunk, "usage_metadata", None)
                prompt_tokens = usage.get("input_tokens") if usage else None
                text = chunk.content if isinstance(chunk.content, str) else ""
                if text or prompt_tokens:
                    yield LLMDelta(text, prompt_tokens)
        except self._timeouts as exc:
            raise GenerationTimeout(f"{self._model_id} at {self._endpoint} timed out") from exc
        except self._rejected as exc:
            if _is_context_overflow(exc):
                raise prompt_too_long(None, None) from exc
            raise ProviderUnavailable(
                f"{self._model_id} at {self._endpoint} refused the request: {exc}"
            ) from exc
        except self._unreachable as exc:
            status = getattr(exc, "status_code", None)
            if status in (401, 403):
                # The reply is left out: some servers echo part of the key they rejected.
                raise ProviderUnavailable(
                    f"{self._model_id} at {self._endpoint} refused the service's credentials "
                    f"(authentication failed, HTTP {status}): check its API key setting"
                ) from exc
            raise ProviderUnavailable(
                f"{self._model_id} at {self._endpoint} is unavailable: {exc}"
            ) from exc


def _build_llamacpp(settings: Settings) -> LLM:
    custom = settings.llm_model_path
    if custom is not None:
        check_gguf_header(custom)

        def resolve() -> Path:
            return custom

        key = str(custom.resolve())
    else:
        models_dir = settings.models_dir

        def resolve() -> Path:
            return ensure_default_model(models_dir)

        key = str(models_dir.resolve())
    name = custom.stem if custom is not None else "qwen2.5-coder-1.5b-instruct-q4_k_m"
    model = _shared_local_model(key, resolve, settings.llm_context_tokens, settings.llm_threads)
    return LlamaCppLLM(
        model,
        model_id=f"llamacpp:{name}",
        max_tokens=settings.llm_max_tokens,
        timeout_s=settings.llm_timeout_s,
        prefix_cache=settings.llm_prefix_cache,
    )


def _build_openai(settings: Settings) -> LLM:
    if not settings.llm_model:
        raise ConfigurationError("RAG_LLM_PROVIDER=openai needs RAG_LLM_MODEL (the model name)")
    if not settings.openai_api_key:
        raise ConfigurationError(
            "RAG_LLM_PROVIDER=openai needs RAG_OPENAI_API_KEY "
            "(any non-empty value for a local server without authentication)"
        )
    import httpx
    import openai
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    # OpenAI's API takes the answer's length as `max_completion_tokens`; OpenAI-compatible
    # servers (llama.cpp's Python server, Ollama, LM Studio) read only `max_tokens` and would
    # otherwise generate until the context is full.
    if settings.openai_base_url:
        length: dict[str, Any] = {"extra_body": {"max_tokens": settings.llm_max_tokens}}
        max_tokens_field = "extra_body"
    else:
        length = {"max_completion_tokens": settings.llm_max_tokens}
        max_tokens_field = "max_tokens"
    chat = ChatOpenAI(
        model=settings.llm_model,
        base_url=settings.openai_base_url,
        api_key=SecretStr(settings.openai_api_key),
        temperature=0.0,
        timeout=settings.llm_timeout_s,
        max_retries=1,
        stream_usage=True,
        **length,
    )
    return ChatServerLLM(
        chat,
        model_id=f"openai:{settings.llm_model}",
        endpoint=settings.openai_base_url or "api.openai.com",
        unreachable=(openai.APIConnectionError, openai.APIStatusError, httpx.HTTPError),
        timeouts=(openai.APITimeoutError, httpx.TimeoutException),
        rejected=(openai.BadRequestError,),
        option_fields=("temperature", max_tokens_field),
        timeout_s=settings.llm_timeout_s,
    )


def _build_ollama(settings: Settings) -> LLM:
    if not settings.llm_model:
        raise ConfigurationError("RAG_LLM_PROVIDER=ollama needs RAG_LLM_MODEL (the model name)")
    import httpx
    import ollama
    from langchain_ollama import ChatOllama

    chat = ChatOllama(
        model=settings.llm_model,
        base_url=settings.ollama_base_url,
        temperature=0.0,
        num_predict=settings.llm_max_tokens,
        client_kwargs={"timeout": settings.llm_timeout_s},
    )
    return ChatServerLLM(
        chat,
        model_id=f"ollama:{settings.llm_model}",
        endpoint=settings.ollama_base_url,
        unreachable=(ConnectionError, ollama.ResponseError, httpx.HTTPError),
        timeouts=(httpx.TimeoutException,),
        option_fields=("temperature", "num_predict"),
        timeout_s=settings.llm_timeout_s,
    )


def _build_extractive(settings: Settings) -> LLM:
    return ExtractiveLLM()


LLMBuilder = Callable[[Settings], LLM]

_REGISTRY = ProviderRegistry[LLMBuilder](
    "RAG_LLM_PROVIDER",
    LLM_PROVIDERS,
    {
        "llamacpp": _build_llamacpp,
        "openai": _build_openai,
        "ollama": _build_ollama,
        "extractive": _build_extractive,
    },
)


def build_llm(settings: Settings) -> LLM:
    """The LLM chosen by RAG_LLM_PROVIDER; heavy models load on first use, once per process."""
    return _REGISTRY.builder(settings.llm_provider)(settings)
