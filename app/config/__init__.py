"""One typed Settings object, read from `RAG_*` environment variables and `.env`.

Its fields are declared by concern, one module each (`service`, `ingestion`, `embeddings`, `web`,
`retrieval`, `generation`, `storage`, `auth`, `sso`, `monitoring`), and combined here by
inheritance into the one flat `Settings`: every field is still `settings.x`, read from `RAG_X`.
What relates settings of several concerns (checks across them, values built from several) lives
here.

Factories read it; leaf code receives plain values. `load_settings()` turns validation errors
into one message that names the offending environment variable.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from dotenv import dotenv_values
from pydantic import ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.config.auth import JWT_TTL_CAP_S, AuthSettings
from app.config.embeddings import (
    EMBEDDING_PROVIDERS,
    EmbeddingProvider,
    EmbeddingSettings,
    EnglishEmbedding,
    SecondEmbedding,
)
from app.config.fields import ENV_PREFIX, GROUPS, Group, setting
from app.config.generation import LLM_PROVIDERS, GenerationSettings, LLMProvider
from app.config.ingestion import IngestionSettings, SectionPathArms
from app.config.monitoring import MonitoringSettings
from app.config.retrieval import (
    FusionMethod,
    RerankerProvider,
    RetrievalSettings,
    VectorBackend,
)
from app.config.service import ServiceSettings
from app.config.sso import SsoSettings
from app.config.storage import CacheBackend, JobBackend, StorageSettings
from app.config.web import WebSettings
from app.errors import ConfigurationError
from app.request_limits import RequestLimits

__all__ = [
    "EMBEDDING_PROVIDERS",
    "ENV_PREFIX",
    "GROUPS",
    "JWT_TTL_CAP_S",
    "LLM_PROVIDERS",
    "RETIRED_SETTINGS",
    "SERVICE_VERSION",
    "CacheBackend",
    "EmbeddingProvider",
    "EnglishEmbedding",
    "FusionMethod",
    "Group",
    "JobBackend",
    "LLMProvider",
    "RerankerProvider",
    "SecondEmbedding",
    "SectionPathArms",
    "Settings",
    "UnknownSetting",
    "VectorBackend",
    "get_settings",
    "load_settings",
    "setting",
    "unknown_settings",
    "warn_of_unknown_settings",
]

# The service's version (the API's OpenAPI version and rag_build_info{version}).
SERVICE_VERSION = "0.1.0"

# Settings that were removed, each with what replaced it. One still set (in the environment or
# the .env file) stops the start with this advice: ignored, it would change the service's
# behaviour without a word.
RETIRED_SETTINGS = {
    f"{ENV_PREFIX}KEYWORD_SKIP_PRONOUNS": f"{ENV_PREFIX}KEYWORD_PRONOUN_WEIGHT (0 is what true "
    "did; false is its default, 1)",
}


# The generated files list each block's settings in the order they are declared in their module.
class Settings(
    MonitoringSettings,
    SsoSettings,
    AuthSettings,
    StorageSettings,
    GenerationSettings,
    RetrievalSettings,
    WebSettings,
    EmbeddingSettings,
    IngestionSettings,
    ServiceSettings,
    BaseSettings,
):
    """Every setting of the service, each with its description, unit and group."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    @model_validator(mode="after")
    def _check_relations(self) -> Settings:
        # A question of RAG_MAX_QUESTION_CHARS, JSON-escaped at 6 bytes a character, must fit.
        if self.max_body_bytes < 6 * self.max_question_chars + 1024:
            raise ValueError(
                f"{ENV_PREFIX}MAX_BODY_BYTES ({self.max_body_bytes}) is too small for "
                f"{ENV_PREFIX}MAX_QUESTION_CHARS ({self.max_question_chars}); allow at least "
                "6 bytes per character plus 1024"
            )
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"{ENV_PREFIX}CHUNK_OVERLAP ({self.chunk_overlap}) must be smaller than "
                f"{ENV_PREFIX}CHUNK_SIZE ({self.chunk_size})"
            )
        if self.top_k > self.max_k:
            raise ValueError(f"{ENV_PREFIX}TOP_K must not exceed {ENV_PREFIX}MAX_K")
        if self.job_stale_after_s < 3 * self.job_heartbeat_s:
            raise ValueError(
                f"{ENV_PREFIX}JOB_STALE_AFTER_S must be at least 3 x {ENV_PREFIX}JOB_HEARTBEAT_S, "
                "or a slow heartbeat makes a live job look abandoned"
            )
        if self.metrics_enabled and not (self.metrics_token or self.metrics_port):
            raise ValueError(
                f"{ENV_PREFIX}METRICS_ENABLED needs {ENV_PREFIX}METRICS_TOKEN (a bearer token "
                f"for /metrics) or {ENV_PREFIX}METRICS_PORT (a port of its own, not published)"
            )
        if self.job_backend == "redis" and self.vector_backend == "chroma":
            raise ValueError(
                f"{ENV_PREFIX}JOB_BACKEND=redis runs ingestion in separate worker processes, "
                "which cannot share an embedded Chroma directory; set "
                f"{ENV_PREFIX}VECTOR_BACKEND=chroma-http"
            )
        return self

    @property
    def request_limits(self) -> RequestLimits:
        """The configured caps of search, question and listing requests."""
        return RequestLimits(
            max_question_chars=self.max_question_chars,
            max_k=self.max_k,
            default_k=self.top_k,
            max_page_size=self.max_page_size,
        )

    @property
    def metrics_bind_host(self) -> str:
        """The address RAG_METRICS_PORT's listener binds: RAG_METRICS_HOST, else RAG_HOST."""
        return self.metrics_host or self.host

    @property
    def sqlalchemy_url(self) -> str:
        """The user/job database; a SQLite file under the data directory by default."""
        return self.database_url or f"sqlite:///{(self.data_dir / 'rag.db').resolve()}"


def load_settings(**overrides: object) -> Settings:
    """Build Settings, or fail with a message naming each invalid or retired `RAG_*` variable."""
    env_file = overrides.get("_env_file", Settings.model_config.get("env_file"))
    retired = _retired_settings_set(env_file if isinstance(env_file, str | Path) else None)
    if retired:
        advice = "; ".join(f"{name} is retired, use {RETIRED_SETTINGS[name]}" for name in retired)
        raise ConfigurationError(f"invalid configuration: {advice}")
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"])
            name = f"{ENV_PREFIX}{field.upper()}" if field else "settings"
            message = err["msg"].removeprefix("Value error, ")
            problems.append(f"{name}: {message} (got {err.get('input')!r})" if field else message)
        raise ConfigurationError("invalid configuration: " + "; ".join(problems)) from exc


def _retired_settings_set(env_file: str | Path | None) -> list[str]:
    """The retired settings named in the environment or the env file (names are not case
    sensitive, as for every setting)."""
    return sorted(_names_set(os.environ, env_file) & RETIRED_SETTINGS.keys())


def _names_set(environ: Mapping[str, str], env_file: str | Path | None) -> set[str]:
    """The upper-cased names of the environment's and the env file's variables."""
    names = {name.upper() for name in environ}
    if env_file is not None and Path(env_file).is_file():
        names |= {name.upper() for name in dotenv_values(env_file)}
    return names


# `RAG_*` variables that other programs of this repository read, not the service: the `rag`
# command line's, and the tests', evaluations' and benchmarks' own.
OTHER_PROGRAMS_VARIABLES = frozenset({"RAG_URL", "RAG_API_KEY", "RAG_CONFIG_FILE"})
OTHER_PROGRAMS_PREFIXES = ("RAG_TEST_", "RAG_EVAL_", "RAG_BENCH_")


@dataclass(frozen=True)
class UnknownSetting:
    """A `RAG_*` variable no setting reads, and the setting its name is closest to, if any."""

    name: str
    closest: str | None

    @property
    def message(self) -> str:
        """What start-up says of it."""
        guess = f" (did you mean {self.closest}?)" if self.closest else ""
        return f"unknown setting ignored: {self.name}{guess}"


def unknown_settings(
    environ: Mapping[str, str], env_file: str | Path | None = ".env"
) -> list[UnknownSetting]:
    """The `RAG_*` variables of the environment and the env file that no setting reads (a typo
    would otherwise be ignored without a word), each with the closest setting's name."""
    known = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields}
    unknown = sorted(
        name
        for name in _names_set(environ, env_file)
        if name.startswith(ENV_PREFIX)
        and name not in known
        and name not in RETIRED_SETTINGS
        and name not in OTHER_PROGRAMS_VARIABLES
        and not name.startswith(OTHER_PROGRAMS_PREFIXES)
    )
    return [
        UnknownSetting(name, next(iter(difflib.get_close_matches(name, known, n=1)), None))
        for name in unknown
    ]


def warn_of_unknown_settings(log: logging.Logger) -> None:
    """Log each `RAG_*` variable of this process that no setting reads (at start-up)."""
    for unknown in unknown_settings(os.environ):
        log.warning(unknown.message, extra={"variable": unknown.name, "closest": unknown.closest})


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return load_settings()
