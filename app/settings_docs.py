"""`.env.example`, docs/configuration.md and the README's table of the settings most
deployments touch, generated from the Settings fields.

Each setting is described once, on its field in app/config/ (description, unit, group); these
files are renderings of that. `tests/test_config.py` fails when one is stale. Regenerate all three:

    python -m app.settings_docs --write .
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
import typing
from collections.abc import Iterator
from pathlib import Path

import annotated_types
from pydantic.fields import FieldInfo

from app.config import ENV_PREFIX, GROUPS, RETIRED_SETTINGS, Group, Settings

# What a production deployment (the Docker image, compose) sets; every other line stays
# commented out and shows the default.
SET_IN_PRODUCTION = {"env": "production", "jwt_secret": ""}
WIDTH = 99

ENV_EXAMPLE_HEADER = """\
# RAG service configuration. Copy to `.env` (read at start-up) or set as environment variables.
# Every setting is listed with its default. Lines left commented keep the default; the uncommented
# lines are what a production deployment (Docker image / compose) changes.
# Invalid values stop start-up with a message naming the variable. The full reference with units
# and allowed values is docs/configuration.md.
# Generated from app/config/ (python -m app.settings_docs --env-example): edit the descriptions
# there, not here.
"""

COMPOSE_ONLY = """\
# --- docker compose only (docker-compose.yml reads these; the service does not) ---
# Required by compose: the PostgreSQL password (also put into RAG_DATABASE_URL by compose).
# POSTGRES_PASSWORD=
# POSTGRES_USER=rag
# POSTGRES_DB=rag
# Required by compose: Redis's password (put into RAG_REDIS_URL) and the Chroma server's token
# (given to the server and as RAG_CHROMA_TOKEN to the service). URL-safe: `openssl rand -hex 32`.
# REDIS_PASSWORD=
# CHROMA_TOKEN=
# Base image of every built image (a local Debian bookworm image with python3 works too).
# BASE_IMAGE=python:3.11-slim
# With `--profile proxy` (nginx serving the api under /rag/ on PROXY_PORT), also set
# (see those settings above):   RAG_ROOT_PATH=/rag   RAG_TRUSTED_PROXIES=172.29.57.250
# PROXY_PORT=8080
# PROXY_IP=172.29.57.250
# With `--profile monitoring` (Prometheus with the alert rules; docs/monitoring.md):
# PROMETHEUS_PORT=9090
# Where the published ports listen (127.0.0.1 = this host only; 0.0.0.0 = every interface).
# API_BIND=127.0.0.1
# PROXY_BIND=127.0.0.1
# PROMETHEUS_BIND=127.0.0.1
# Memory limits per container (also API_CPUS, WORKER_CPUS, ... in docker-compose.yml).
# API_MEMORY=6g
# WORKER_MEMORY=3g
# uvicorn processes in the api container, and the published port.
# API_WORKERS=2
# API_PORT=8000
# Collections whose HNSW index the Chroma server keeps in memory, least recently used evicted
# (~2.6 MB each when small, ~40 MB per 10k chunks; docker/chroma/bounded_cache.py).
# CHROMA_HNSW_CACHE_COLLECTIONS=64
"""

REFERENCE_HEADER = """\
# Configuration reference

Every setting of the service, read from `RAG_*` environment variables or `.env` (copy
`.env.example`). Invalid values stop start-up with a message naming the variable, and so does a
retired setting (table at the end). A `RAG_*` variable that no setting reads, a misspelt one say,
is named in the start-up log with the setting it resembles. Settings that can change an answer
are part of the answer cache key (`AnswerShape`, `app/answer_shape.py`).

Generated from `app/config/` (`python -m app.settings_docs --reference`); edit the
descriptions there, not here.
"""


def variable(name: str) -> str:
    """The environment variable of a Settings field."""
    return f"{ENV_PREFIX}{name.upper()}"


def shown_default(field: FieldInfo) -> str:
    """The default as an environment variable would spell it (unset: empty)."""
    default = field.default
    if default is None:
        return ""
    if isinstance(default, bool):
        return str(default).lower()
    return str(default)


def unit_of(field: FieldInfo) -> str:
    extra = field.json_schema_extra
    return str(extra.get("unit", "")) if isinstance(extra, dict) else ""


def group_of(field: FieldInfo) -> str:
    extra = field.json_schema_extra
    return str(extra["group"]) if isinstance(extra, dict) else ""


def allowed_values(field: FieldInfo) -> str:
    """The field's choices or bounds, e.g. `development, production` or `>= 1, <= 65535`."""
    annotation = field.annotation
    choices = [
        str(arg)
        for part in (typing.get_args(annotation) or (annotation,))
        if typing.get_origin(part) is typing.Literal
        for arg in typing.get_args(part)
    ]
    if typing.get_origin(annotation) is typing.Literal:
        choices = [str(arg) for arg in typing.get_args(annotation)]
    if choices:
        return ", ".join(choices)
    bounds = []
    for rule in field.metadata:
        for attribute, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            value = getattr(rule, attribute, None)
            if isinstance(rule, annotated_types.BaseMetadata) and value is not None:
                bounds.append(f"{sign} {value}")
    return ", ".join(bounds)


def fields_of(group: Group) -> Iterator[tuple[str, FieldInfo]]:
    for name, field in Settings.model_fields.items():
        if group_of(field) == group.key:
            yield name, field


def comment(text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH - 2, initial_indent="# ", subsequent_indent="# ")


def render_env_example() -> str:
    """The text of `.env.example`."""
    lines = [ENV_EXAMPLE_HEADER.rstrip("\n")]
    for group in GROUPS:
        lines += ["", f"# --- {group.title} ---"]
        if group.intro:
            lines += comment(group.intro)
        for name, field in fields_of(group):
            unit = unit_of(field)
            lines += comment(f"{field.description} [{unit}]" if unit else str(field.description))
            if name in SET_IN_PRODUCTION:
                lines.append(f"{variable(name)}={SET_IN_PRODUCTION[name]}")
            else:
                lines.append(f"# {variable(name)}={shown_default(field)}")
    lines += ["", COMPOSE_ONLY.rstrip("\n")]
    return "\n".join(lines) + "\n"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_reference() -> str:
    """The text of docs/configuration.md."""
    lines = [REFERENCE_HEADER.rstrip("\n")]
    for group in GROUPS:
        lines += ["", f"## {group.title[0].upper()}{group.title[1:]}", ""]
        if group.intro:
            lines += [group.intro, ""]
        lines += ["| variable | default | unit | allowed | meaning |", "|---|---|---|---|---|"]
        for name, field in fields_of(group):
            default = shown_default(field)
            row = [
                f"`{variable(name)}`",
                f"`{cell(default)}`" if default else "(empty)",
                cell(unit_of(field)),
                cell(allowed_values(field)),
                cell(str(field.description)),
            ]
            lines.append("| " + " | ".join(row) + " |")
    lines += ["", "## Retired settings", ""]
    lines += ["Still set, one of these stops start-up with the advice given here.", ""]
    lines += ["| variable | use instead |", "|---|---|"]
    lines += [f"| `{name}` | {cell(advice)} |" for name, advice in sorted(RETIRED_SETTINGS.items())]
    return "\n".join(lines) + "\n"


# The settings most deployments touch, in the README's "Configuration" section.
README_SETTINGS = (
    "env",
    "jwt_secret",
    "host",
    "port",
    "data_dir",
    "embedding_provider",
    "second_embedding",
    "llm_provider",
    "reranker",
    "database_url",
    "vector_backend",
    "job_backend",
    "cache_backend",
    "rate_limit_backend",
    "max_upload_bytes",
    "hot_tenants",
    "memory_budget_mb",
    "quota_chunks",
    "trusted_proxies",
    "root_path",
)
README_BEGIN = "<!-- settings table: generated by `python -m app.settings_docs --write .` -->"
README_END = "<!-- end of the generated settings table -->"


SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)\.\s+(?=[A-Z(`])")


def first_sentence(text: str) -> str:
    """A description up to the full stop that ends its first sentence ("e.g. " does not)."""
    found = SENTENCE_END.search(text)
    return text[: found.start() + 1] if found else text


def render_readme_table() -> str:
    """The README's table of the settings most deployments touch, between its markers."""
    lines = [README_BEGIN, "| variable | default | meaning |", "|---|---|---|"]
    for name in README_SETTINGS:
        field = Settings.model_fields[name]
        default, unit = shown_default(field), unit_of(field)
        shown = f"`{cell(default)}`{' ' + unit if unit else ''}" if default else "(empty)"
        meaning = cell(first_sentence(str(field.description)))
        lines.append(f"| `{variable(name)}` | {shown} | {meaning} |")
    return "\n".join([*lines, README_END]) + "\n"


def with_readme_table(readme: str) -> str:
    """The README's text with its settings table regenerated (the markers must be there)."""
    before, begin, rest = readme.partition(README_BEGIN)
    _, end, after = rest.partition(README_END + "\n")
    if not (begin and end):
        raise ValueError(f"README.md lacks the lines {README_BEGIN!r} and {README_END!r}")
    return before + render_readme_table() + after


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    choice = parser.add_mutually_exclusive_group(required=True)
    choice.add_argument("--env-example", action="store_true", help="print .env.example")
    choice.add_argument("--reference", action="store_true", help="print docs/configuration.md")
    choice.add_argument(
        "--write",
        type=Path,
        metavar="REPO",
        help="write both files and the README's settings table under this checkout",
    )
    args = parser.parse_args(argv)
    if args.write:
        (args.write / ".env.example").write_text(render_env_example(), encoding="utf-8")
        (args.write / "docs" / "configuration.md").write_text(render_reference(), encoding="utf-8")
        readme = args.write / "README.md"
        readme.write_text(with_readme_table(readme.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        sys.stdout.write(render_env_example() if args.env_example else render_reference())
    return 0


if __name__ == "__main__":
    sys.exit(main())
