"""/openapi.json with the configured caps, so clients generated from it send what is accepted,
and the documented 200 of a route whose body is not a JSON model (`content_response`).

The request models carry static outer bounds; the real limits (`RAG_MAX_K`,
`RAG_MAX_QUESTION_CHARS`, `RAG_MAX_PAGE_SIZE` of every listing) are settings, written into the
schema here from the same `RequestLimits` the services enforce (app.request_limits).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from app.config import Settings
from app.request_limits import RequestLimits

# JSON Schema `pattern` is a search: the text must contain one non-whitespace character.
NOT_BLANK = r"\S"


def _set_text_limit(model: dict[str, Any], field: str, max_chars: int) -> None:
    prop = model["properties"][field]
    prop["maxLength"] = max_chars
    prop["pattern"] = NOT_BLANK


def _set_k_limit(model: dict[str, Any], max_k: int) -> None:
    for option in model["properties"]["k"].get("anyOf", []):
        if option.get("type") == "integer":
            option["maximum"] = max_k


def content_response(description: str, media_type: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entry of a route's 200 whose body is of `media_type` (server-sent
    events, a picture, JSON lines), beside or instead of its JSON model."""
    return {200: {"content": {media_type: {}}, "description": description}}


def apply_limits(schema: dict[str, Any], limits: RequestLimits) -> dict[str, Any]:
    """Write the configured caps into an OpenAPI document (in place) and return it."""
    models = schema.get("components", {}).get("schemas", {})
    for name, field in (("SearchIn", "query"), ("QueryIn", "question"), ("MessageIn", "content")):
        if name in models:
            _set_text_limit(models[name], field, limits.max_question_chars)
            _set_k_limit(models[name], limits.max_k)
    # Every listing's `limit` query parameter is a page size (`PageLimit`).
    for item in schema.get("paths", {}).values():
        for parameter in item.get("get", {}).get("parameters", []):
            if parameter.get("name") == "limit" and parameter.get("in") == "query":
                for option in parameter["schema"].get("anyOf", [parameter["schema"]]):
                    if option.get("type") == "integer":
                        option["maximum"] = limits.max_page_size
    return schema


def install_openapi_limits(app: FastAPI, settings: Callable[[], Settings]) -> None:
    """Make `app.openapi()` document the limits of the settings the app runs with."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = apply_limits(build(), settings().request_limits)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
