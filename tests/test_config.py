"""Settings: invalid values stop start-up naming the variable; .env.example documents them all."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from app import settings_docs
from app.config import GROUPS, Settings, load_settings, unknown_settings
from app.errors import ConfigurationError

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]


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


@pytest.mark.parametrize("source", ["environment", "env file"])
def test_a_retired_setting_still_set_stops_the_start_saying_what_replaced_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, source: str
) -> None:
    # Ignored, it would quietly put the pronouns back at full weight.
    env_file = tmp_path / ".env"
    env_file.write_text("RAG_CHUNK_SIZE=700\n")
    if source == "environment":
        monkeypatch.setenv("rag_keyword_skip_pronouns", "true")  # names are not case sensitive
    else:
        env_file.write_text("RAG_CHUNK_SIZE=700\nRAG_KEYWORD_SKIP_PRONOUNS=true\n")
    with pytest.raises(ConfigurationError) as info:
        load_settings(_env_file=env_file)
    assert "RAG_KEYWORD_SKIP_PRONOUNS" in str(info.value)
    assert "RAG_KEYWORD_PRONOUN_WEIGHT" in str(info.value)
    monkeypatch.delenv("rag_keyword_skip_pronouns", raising=False)
    env_file.write_text("RAG_CHUNK_SIZE=700\nRAG_KEYWORD_PRONOUN_WEIGHT=0\n")
    assert load_settings(_env_file=env_file).keyword_pronoun_weight == 0.0


def test_unknown_variables_are_the_services_own_misspellings_only(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("RAG_EMBEDING_PROVIDER=use\nOTHER=1\n")
    environ = {
        "rag_chunk_siz": "500",  # names are not case sensitive
        "RAG_CHUNK_SIZE": "700",
        "RAG_URL": "http://rag",  # the command line's
        "RAG_EVAL_DATA_DIR": "/data",  # the evaluations'
        "RAG_KEYWORD_SKIP_PRONOUNS": "true",  # retired: load_settings refuses it
        "HOME": "/root",
    }
    found = {(u.name, u.closest) for u in unknown_settings(environ, env_file)}
    assert found == {
        ("RAG_CHUNK_SIZ", "RAG_CHUNK_SIZE"),
        ("RAG_EMBEDING_PROVIDER", "RAG_EMBEDDING_PROVIDER"),
    }
    assert unknown_settings({"RAG_ZZZZZZZZ": "1"}, None)[0].closest is None


SECRETS = {
    "jwt_secret": "jwt-3f9c1a7e5b2d8c4f6a0e9b1d7c3f5a8e2b",
    "database_url": "postgresql+psycopg://rag:pg-pass-71c2e9@db:5432/rag",
    "redis_url": "redis://:redis-pass-5d8a03@cache:6379/0",
    "openai_api_key": "sk-openai-9e4b27",
    "langsmith_api_key": "ls-key-60f1c3",
    "chroma_token": "chroma-token-2a7d95",
    "api_key_secret": "key-hmac-secret-8b3e61-long-enough-0123456789",
    "metrics_token": "metrics-token-4c09fe",
}
SECRET_PARTS = ("3f9c1a7e", "pg-pass-71c2e9", "redis-pass-5d8a03", "9e4b27", "60f1c3", "2a7d95")
SECRET_PARTS += ("8b3e61", "4c09fe")


def test_printing_the_settings_shows_no_secret() -> None:
    # A settings object in a log line, a traceback's locals or a debugger must not leak them.
    settings = load_settings(_env_file=None, **SECRETS)
    assert settings.redis_url == SECRETS["redis_url"]  # kept, only not shown
    for shown in (repr(settings), str(settings), f"{settings!r}"):
        for part in SECRET_PARTS:
            assert part not in shown, part
    assert "jwt_ttl_s=" in repr(settings)  # the rest is still there to read


def test_every_setting_has_its_description_unit_and_group() -> None:
    groups = {group.key for group in GROUPS}
    for name, field in Settings.model_fields.items():
        extra = field.json_schema_extra
        assert field.description, f"RAG_{name.upper()} has no description"
        assert isinstance(extra, dict) and extra.get("group") in groups, name
        assert "unit" in extra, name


@pytest.mark.parametrize(
    ("path", "render", "option"),
    [
        (".env.example", settings_docs.render_env_example, "--env-example"),
        ("docs/configuration.md", settings_docs.render_reference, "--reference"),
    ],
)
def test_generated_configuration_files_are_current(
    path: str, render: Callable[[], str], option: str
) -> None:
    current = (REPO / path).read_text(encoding="utf-8")
    assert current == render(), (
        f"{path} is stale: run `python -m app.settings_docs {option} > {path}`"
    )


def test_the_readme_settings_table_is_generated_from_the_settings_fields() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert settings_docs.render_readme_table() in readme, (
        "README.md's settings table is stale: run `python -m app.settings_docs --write .`"
    )
    defaults = Settings.model_fields
    assert f"| `RAG_PORT` | `{defaults['port'].default}` |" in readme
    assert f"| `RAG_HOT_TENANTS` | `{defaults['hot_tenants'].default}` tenants |" in readme


def test_the_readme_table_follows_a_changed_default() -> None:
    stale = (
        (REPO / "README.md")
        .read_text(encoding="utf-8")
        .replace("| `RAG_PORT` | `8000` |", "| `RAG_PORT` | `8080` |")
    )
    assert "`8080`" in stale
    assert "| `RAG_PORT` | `8000` |" in settings_docs.with_readme_table(stale)
    with pytest.raises(ValueError, match="lacks the lines"):
        settings_docs.with_readme_table("# A README without the markers\n")


def test_env_example_shows_every_default_a_deployment_keeps() -> None:
    text = (REPO / ".env.example").read_text(encoding="utf-8")
    documented = dict(re.findall(r"^#? ?(RAG_[A-Z0-9_]+)=(.*)$", text, flags=re.MULTILINE))
    assert sorted(documented) == sorted(f"RAG_{name.upper()}" for name in Settings.model_fields)
    assert documented["RAG_ENV"] == "production"
    assert documented["RAG_CHUNK_SIZE"] == "1000"
    assert documented["RAG_LLM_PREFIX_CACHE"] == "true"
    assert documented["RAG_RELEVANCE_THRESHOLD"] == ""
    # The file is read back as a valid configuration with the production lines set.
    assert re.search(r"^RAG_JWT_SECRET=$", text, flags=re.MULTILINE)


@pytest.mark.parametrize("variable", ["RAG_LLM_PROVIDER", "RAG_EMBEDDING_PROVIDER"])
def test_the_test_fakes_are_no_provider_a_deployment_can_name(variable: str) -> None:
    # A fresh interpreter, as a deployment starts: the fakes are no value of the setting.
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
    assert f"{variable}: Input should be " in result.stderr
