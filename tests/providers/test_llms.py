"""The LLM factory: every provider, misconfiguration named at build time, unreachable servers,
the serialised local model, and the model file that must match its sha256 before it loads."""

from __future__ import annotations

import hashlib
import socket
import threading
from pathlib import Path

import numpy as np
import pytest

from app.config import LLM_PROVIDERS, Settings
from app.errors import (
    ConfigurationError,
    GenerationTimeout,
    ModelIntegrityError,
    ProviderUnavailable,
)
from app.providers.gguf import DEFAULT_MODEL, ModelFile, assemble, verify_model_file
from app.providers.llms import LatinStartMask, LlamaCppLLM, build_llm
from app.providers.types import LLM, ChatMessage, ChatRequest
from app.text.language import has_latin_letter, has_letter

pytestmark = pytest.mark.unit

REQUEST = ChatRequest(messages=(ChatMessage("system", "rules"), ChatMessage("user", "question")))


def _with(settings: Settings, **changes: object) -> Settings:
    return settings.model_copy(update=changes)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("changes", "model_id"),
    [
        ({"llm_provider": "extractive"}, "extractive"),
        ({"llm_provider": "openai", "llm_model": "m", "openai_api_key": "k"}, "openai:m"),
        ({"llm_provider": "ollama", "llm_model": "qwen2.5:1.5b"}, "ollama:qwen2.5:1.5b"),
        ({"llm_provider": "llamacpp"}, "llamacpp:qwen2.5-coder-1.5b-instruct-q4_k_m"),
    ],
)
def test_every_provider_builds_without_loading_anything(
    settings: Settings, changes: dict[str, object], model_id: str, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    llm = build_llm(_with(settings, models_dir=models, **changes))
    assert isinstance(llm, LLM)
    assert llm.model_id == model_id
    # The local model is assembled (1.1 GB) and loaded on first use, not when it is built.
    assert not models.exists() or not any(models.iterdir())


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"llm_provider": "openai", "openai_api_key": "k"}, "RAG_LLM_MODEL"),
        ({"llm_provider": "openai", "llm_model": "m"}, "RAG_OPENAI_API_KEY"),
        ({"llm_provider": "ollama"}, "RAG_LLM_MODEL"),
    ],
)
def test_missing_configuration_is_named_at_build_time(
    settings: Settings, changes: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigurationError, match=named):
        build_llm(_with(settings, **changes))


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_unreachable_server_is_provider_unavailable(settings: Settings, provider: str) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    llm = build_llm(
        _with(
            settings,
            llm_provider=provider,
            llm_model="m",
            openai_api_key="k",
            openai_base_url=url + "/v1",
            ollama_base_url=url,
            llm_timeout_s=5.0,
        )
    )
    with pytest.raises(ProviderUnavailable, match="unavailable"):
        list(llm.stream(REQUEST))


def test_model_path_that_is_not_gguf_is_refused(settings: Settings, tmp_path: Path) -> None:
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_bytes(b"<html>404</html>")
    with pytest.raises(ConfigurationError, match="not a GGUF file"):
        build_llm(_with(settings, llm_provider="llamacpp", llm_model_path=not_gguf))
    with pytest.raises(ConfigurationError, match="does not exist"):
        build_llm(
            _with(settings, llm_provider="llamacpp", llm_model_path=tmp_path / "missing.gguf")
        )


def test_local_model_answers_one_request_at_a_time(settings: Settings, tmp_path: Path) -> None:
    fake_gguf = tmp_path / "busy.gguf"
    fake_gguf.write_bytes(b"GGUF" + bytes(16))
    llm = build_llm(
        _with(settings, llm_provider="llamacpp", llm_model_path=fake_gguf, llm_timeout_s=0.3)
    )
    assert isinstance(llm, LlamaCppLLM)
    lock = llm._model.lock  # the process-wide lock another answer would hold
    assert lock.acquire()
    try:
        with pytest.raises(GenerationTimeout, match=r"busy with other answers for 0\.3 s"):
            list(llm.stream(REQUEST))
    finally:
        lock.release()
    # Another instance for the same file shares the lock: still one generation per process.
    other = build_llm(
        _with(settings, llm_provider="llamacpp", llm_model_path=fake_gguf, llm_timeout_s=600)
    )
    assert isinstance(other, LlamaCppLLM) and other._model.lock is lock
    # It waits for the lock rather than refusing, and goes on once the other answer ends (to
    # load the model, which this fake file is not).
    outcome: list[BaseException] = []

    def answer() -> None:
        try:
            list(other.stream(REQUEST))
        except Exception as exc:
            outcome.append(exc)

    assert lock.acquire()
    waiter = threading.Thread(target=answer)
    try:
        waiter.start()
        waiter.join(0.2)
        assert waiter.is_alive() and not outcome  # still waiting while the lock is held
    finally:
        lock.release()
    waiter.join()
    assert len(outcome) == 1 and not isinstance(outcome[0], GenerationTimeout), outcome


def _small_model(tmp_path: Path, content: bytes) -> tuple[Path, ModelFile]:
    path = tmp_path / "small.gguf"
    path.write_bytes(content)
    return path, ModelFile("small.gguf", len(content), hashlib.sha256(content).hexdigest())


def test_verifier_accepts_the_exact_file(tmp_path: Path) -> None:
    path, expected = _small_model(tmp_path, b"GGUF" + bytes(range(256)) * 4)
    verify_model_file(path, expected)


def test_verifier_refuses_a_truncated_file(tmp_path: Path) -> None:
    path, expected = _small_model(tmp_path, b"GGUF" + bytes(range(256)) * 4)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ModelIntegrityError, match=r"1,030 bytes, expected 1,028|expected 1,028"):
        verify_model_file(path, expected)


def test_verifier_refuses_an_altered_file_of_the_same_size(tmp_path: Path) -> None:
    path, expected = _small_model(tmp_path, b"GGUF" + bytes(range(256)) * 4)
    altered = bytearray(path.read_bytes())
    altered[500] ^= 0xFF
    path.write_bytes(bytes(altered))
    with pytest.raises(ModelIntegrityError, match=r"sha256 \w+ does not match"):
        verify_model_file(path, expected)


def test_assembly_writes_the_file_only_when_it_matches(tmp_path: Path) -> None:
    parts = []
    for index, content in enumerate([b"GGUF-part-one|", b"part-two|", b"part-three"]):
        part = tmp_path / f"part{index}"
        part.write_bytes(content)
        parts.append(part)
    whole = b"GGUF-part-one|part-two|part-three"
    expected = ModelFile("m.gguf", len(whole), hashlib.sha256(whole).hexdigest())
    target = assemble(parts, tmp_path / "models" / "m.gguf", expected)
    assert target.read_bytes() == whole

    wrong_order = tmp_path / "models2" / "m.gguf"
    with pytest.raises(ModelIntegrityError, match="reinstall the part packages"):
        assemble(list(reversed(parts)), wrong_order, expected)
    assert not wrong_order.exists()
    assert list(wrong_order.parent.iterdir()) == []  # no half-written leftovers


def test_local_model_refuses_a_truncated_default_file(settings: Settings, tmp_path: Path) -> None:
    models_dir = tmp_path / "models"
    models_dir.mkdir()
    (models_dir / DEFAULT_MODEL.name).write_bytes(b"GGUF" + bytes(1000))
    llm = build_llm(_with(settings, llm_provider="llamacpp", models_dir=models_dir))
    with pytest.raises(ModelIntegrityError, match="1,004 bytes, expected 1,117,320,768"):
        list(llm.stream(REQUEST))


def test_lock_is_released_when_loading_fails(settings: Settings, tmp_path: Path) -> None:
    models_dir = tmp_path / "models"
    models_dir.mkdir()
    (models_dir / DEFAULT_MODEL.name).write_bytes(b"tiny")
    llm = build_llm(_with(settings, llm_provider="llamacpp", models_dir=models_dir))
    for _ in range(2):  # the second call would time out if the first had kept the lock
        with pytest.raises(ModelIntegrityError):
            list(llm.stream(REQUEST))


# Vocabulary of a toy model: which tokens hold a Latin letter, which hold any letter.
TOY_PIECES = ["The", " answer", "ال", "جواب", " ", "1889", "[", "I"]
TOY_LATIN = np.array([has_latin_letter(p) for p in TOY_PIECES])
TOY_LETTERS = np.array([has_letter(p) for p in TOY_PIECES])


def _argmax_after(guard: LatinStartMask, input_ids: list[int], logits: list[float]) -> int:
    return int(np.argmax(guard(np.array(input_ids), np.array(logits, dtype=np.float32))))


def test_latin_start_mask_masks_latin_tokens_until_the_answer_has_its_first_letter() -> None:
    refusal_first = TOY_PIECES.index("I")
    guard = LatinStartMask(TOY_LATIN, TOY_LETTERS, refusal_first)
    prompt = [4, 4, 4]
    # The model prefers "The": masked, so the best non-Latin token ("ال") wins.
    first = [9.0, 8.0, 5.0, 1.0, 6.0, 0.0, 0.0, 0.0]
    assert TOY_PIECES[_argmax_after(guard, prompt, first)] == " "
    # A space carries no letter: the mask still applies at the next position.
    second = [9.0, 8.0, 5.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert TOY_PIECES[_argmax_after(guard, [*prompt, 4], second)] == "ال"
    # Once an Arabic letter has been produced, the logits are left alone (names in Latin
    # script can follow).
    assert TOY_PIECES[_argmax_after(guard, [*prompt, 4, 2], second)] == "The"


def test_latin_start_mask_leaves_the_allowed_token_open() -> None:
    refusal_first = TOY_PIECES.index("I")
    guard = LatinStartMask(TOY_LATIN, TOY_LETTERS, refusal_first)
    logits = [5.0, 4.0, 1.0, 1.0, 0.0, 0.0, 0.0, 9.0]
    assert TOY_PIECES[_argmax_after(guard, [4], logits)] == "I"


@pytest.mark.parametrize(
    ("changes", "tokens_field"),
    [
        ({"llm_provider": "openai", "llm_model": "m", "openai_api_key": "k"}, "max_tokens"),
        ({"llm_provider": "ollama", "llm_model": "m"}, "num_predict"),
    ],
)
def test_request_options_reach_a_chat_server_without_changing_the_shared_model(
    settings: Settings, changes: dict[str, object], tokens_field: str
) -> None:
    llm = build_llm(_with(settings, llm_max_tokens=256, **changes))
    shared = llm._chat  # type: ignore[attr-defined]
    plain = llm._chat_for(REQUEST)  # type: ignore[attr-defined]
    assert plain is shared
    tuned = llm._chat_for(  # type: ignore[attr-defined]
        ChatRequest(messages=REQUEST.messages, max_tokens=32, temperature=0.7)
    )
    assert (getattr(tuned, tokens_field), tuned.temperature) == (32, 0.7)
    assert (getattr(shared, tokens_field), shared.temperature) == (256, 0.0)


def test_settings_accept_exactly_the_providers_the_factory_builds(settings: Settings) -> None:
    # The factory's refusal of an unknown name lists every provider it can build.
    with pytest.raises(ConfigurationError) as refused:
        build_llm(settings.model_copy(update={"llm_provider": "no-such-llm"}))
    assert str(refused.value).endswith("expected one of " + ", ".join(sorted(LLM_PROVIDERS)))
