"""What every settings module is written with: the `RAG_` prefix, the blocks settings are shown
in (`GROUPS`), and `setting`, a field with its one description, unit and block."""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import Field
from pydantic.config import JsonDict

ENV_PREFIX = "RAG_"


class Group(NamedTuple):
    """A block of related settings: its title and what applies to all of them."""

    key: str
    title: str
    intro: str = ""


# The blocks of `.env.example` and docs/configuration.md, in order.
GROUPS: tuple[Group, ...] = (
    Group("service", "service"),
    Group("ingestion", "ingestion"),
    Group("embeddings", "embeddings"),
    Group("servers", "OpenAI-compatible and Ollama servers (only used when a provider names them)"),
    Group("web", "web app, API docs, cited page pictures"),
    Group("vector", "vector store"),
    Group("retrieval", "retrieval"),
    Group(
        "reranker",
        "reranker",
        "Weights must be present (python scripts/download_models.py); a missing model stops "
        "start-up. The quick start uses none because no weights ship offline. The Docker image "
        "chooses by itself (cross-encoder if its build could fetch the model, else none); set "
        "RAG_RERANKER only to override that.",
    ),
    Group("generation", "generation"),
    Group(
        "answers",
        'answer concurrency (per API process; docs/operations.md "Capacity and backpressure")',
        "The local model answers one question at a time, so 1 answer at once keeps every waiting "
        "answer off the threads; raise the bounds for an OpenAI-compatible or Ollama server (they "
        "also bound the spend in flight). A cache hit needs no slot. Beyond the bounds and the "
        "queue: a fast 429 (the caller's own user or tenant is at its bound) or 503 (server "
        "busy), with Retry-After.",
    ),
    Group(
        "conversations",
        "conversations and /v1/chat/completions",
        "A follow-up is rewritten into a standalone question from the latest turns before "
        "retrieval.",
    ),
    Group("storage", "storage, jobs, cache"),
    Group(
        "quotas",
        "tenant quotas and job scheduling",
        "Per-tenant quotas, shown with their usage by GET /stats. Going over one refuses the "
        "upload or conversation with 413 `quota_exceeded` (the message names the quota) and "
        "stores nothing.",
    ),
    Group("auth", "auth and abuse limits"),
    Group("http", "HTTP limits and proxies"),
    Group(
        "metrics",
        "metrics and traces",
        "Off unless configured; docs/monitoring.md. /metrics is protected by a bearer token on "
        "the API's port, or served only on a port of its own that the gateway does not publish. "
        "Several processes (uvicorn --workers, rq workers) share PROMETHEUS_MULTIPROC_DIR, "
        "emptied before they start, so one scrape sees them all.",
    ),
    Group("tracing", "tracing (nothing is sent anywhere unless turned on)"),
)


def setting(
    default: Any, *, group: str, description: str, unit: str = "", **constraints: Any
) -> Any:
    """A Settings field with its one description, its unit and its block (`GROUPS`).

    `.env.example` and docs/configuration.md are generated from these (app/settings_docs.py).
    """
    extra: JsonDict = {"group": group, "unit": unit}
    return Field(default, description=description, json_schema_extra=extra, **constraints)


def split_list(value: str) -> list[str]:
    """A comma separated setting as its non-empty, trimmed parts."""
    return [part.strip() for part in value.split(",") if part.strip()]
