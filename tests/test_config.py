"""Settings: invalid values stop start-up naming the variable; .env.example documents them all."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.config import Settings, load_settings
from app.errors import ConfigurationError

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
ENV_EXAMPLE = REPO / ".env.example"


@pytest.mark.parametrize(
    ("overrides", "variable"),
    [
        ({"embedding_provider": "word2vec"}, "RAG_EMBEDDING_PROVIDER"),
        ({"llm_provider": "gpt-banana"}, "RAG_LLM_PROVIDER"),
        ({"reranker": "colbert"}, "RAG_RERANKER"),
        ({"chunk_size": -5}, "RAG_CHUNK_SIZE"),
        ({"chunk_overlap": -1}, "RAG_CHUNK_OVERLAP"),
        ({"chunk_size": 200, "chunk_overlap": 200}, "RAG_CHUNK_OVERLAP"),
        ({"bcrypt_rounds": 4}, "RAG_BCRYPT_ROUNDS"),
        ({"port": 70000}, "RAG_PORT"),
        ({"jwt_ttl_s": 24 * 3600 + 1}, "RAG_JWT_TTL_S"),  # capped at a day (README)
        ({"revocation_backend": "memcached"}, "RAG_REVOCATION_BACKEND"),
        ({"audit_retention_days": 0}, "RAG_AUDIT_RETENTION_DAYS"),
    ],
)
def test_invalid_values_fail_naming_the_variable(
    overrides: dict[str, object], variable: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        load_settings(_env_file=None, **overrides)
    assert variable in str(info.value)


def test_environment_variables_are_read_with_the_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_CHUNK_SIZE", "700")
    monkeypatch.setenv("RAG_CHUNK_OVERLAP", "70")
    settings = load_settings(_env_file=None)
    assert (settings.chunk_size, settings.chunk_overlap) == (700, 70)


def test_invalid_environment_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_TOP_K", "many")
    with pytest.raises(ConfigurationError, match="RAG_TOP_K"):
        load_settings(_env_file=None)


def test_env_example_lists_every_setting_with_its_default() -> None:
    text = ENV_EXAMPLE.read_text(encoding="utf-8")
    documented = dict(re.findall(r"^#? ?(RAG_[A-Z0-9_]+)=(.*)$", text, flags=re.MULTILINE))
    defaults = Settings.model_fields
    missing = [
        f"RAG_{name.upper()}" for name in defaults if f"RAG_{name.upper()}" not in documented
    ]
    assert not missing, f".env.example lacks {missing}"
    unknown = [name for name in documented if name[4:].lower() not in defaults]
    assert not unknown, f".env.example documents unknown settings {unknown}"
    # Commented lines show the default; compare them to the code's defaults.
    for name, value in re.findall(r"^# (RAG_[A-Z0-9_]+)=(.*)$", text, flags=re.MULTILINE):
        default = defaults[name[4:].lower()].default
        shown = "" if default is None else str(default)
        if isinstance(default, bool):
            shown = str(default).lower()
        assert value == shown, f"{name}: .env.example says {value!r}, code default is {shown!r}"


@pytest.mark.parametrize("variable", ["RAG_LLM_PROVIDER", "RAG_EMBEDDING_PROVIDER"])
def test_the_test_fakes_are_no_provider_outside_the_tests(variable: str) -> None:
    # A fresh interpreter, as a deployment starts: nothing registered the test fakes there.
    script = "from app.config import load_settings; load_settings(_env_file=None)"
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={"PATH": "", variable: "fake", "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert f"{variable}: unknown provider" in result.stderr
