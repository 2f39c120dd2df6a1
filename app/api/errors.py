"""One error body everywhere: `{"error": {"code", "message"}}`, validation errors included."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.api.schemas import ErrorOut
from app.errors import (
    GENERIC_SERVER_MESSAGE,
    ProviderUnavailable,
    RagError,
    RateLimited,
    public_message,
    unreachable_server_errors,
)
from app.observability import error_payload

log = logging.getLogger("app.api")

_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    500: "internal_error",
    503: "unavailable",
}


_DESCRIPTIONS = {
    400: "the request lacks something it needs; the code says what (e.g. `tenant_required`)",
    401: "missing, invalid or expired bearer token (or wrong credentials)",
    403: "your role may not do this (app/api/access.py has the table); the message names the role",
    404: "not found (another tenant's resource is reported the same way)",
    409: "conflicts with the current state (e.g. an index built with another embedding model)",
    413: "the body is larger than the configured limit (uploads: RAG_MAX_UPLOAD_BYTES), or "
    "storing it would pass a quota (`quota_exceeded`, the message names it)",
    415: "the file type (or, for /auth/token, the body's content type) is not supported",
    422: "the request is invalid; the message says which field and why",
    429: "rate limited; retry after the `Retry-After` header's seconds",
    503: "a component (model, store, provider) is unavailable; the body carries the request id",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries documenting the shared error body for these statuses."""
    return {
        status: {"model": ErrorOut, "description": _DESCRIPTIONS[status]} for status in statuses
    }


class ApiError(Exception):
    """An HTTP error with a stable code, raised by routes and dependencies."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The JSON error body every failure shares; a server error's also names the request id."""
    return JSONResponse(
        {"error": error_payload(code, message, status)},
        status_code=status,
        headers=dict(headers or {}),
    )


def internal_error_response() -> JSONResponse:
    """The 500 for an unexpected exception: nothing about it, only the request id."""
    return error_response(500, "internal_error", f"{GENERIC_SERVER_MESSAGE}; see server logs")


def _describe_validation(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        # A validator's own words come without pydantic's "Value error, " in front.
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    """Map every exception to the shared error body, and log it."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        log.info("request rejected", extra={"status": exc.status, "code": exc.code})
        return error_response(exc.status, exc.code, exc.message, exc.headers)

    @app.exception_handler(RagError)
    async def _rag_error(request: Request, exc: RagError) -> JSONResponse:
        # The full message stays here: a server error's may name hosts, URLs or upstream bodies.
        log.warning(
            "request failed",
            extra={"status": exc.http_status, "code": exc.code, "detail": exc.message},
        )
        headers = None
        if isinstance(exc, RateLimited):  # every 429 tells the client when to come back
            headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
        return error_response(exc.http_status, exc.code, public_message(exc), headers)

    async def _unreachable(request: Request, exc: Exception) -> JSONResponse:
        # A server the service calls directly (the Chroma server) did not answer: a 503 to
        # retry, like any unavailable component, not a 500.
        return await _rag_error(request, ProviderUnavailable(f"server unreachable: {exc!r}"))

    for kind in unreachable_server_errors():
        app.add_exception_handler(kind, _unreachable)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        message = _describe_validation(exc)
        log.info("invalid request", extra={"status": 422, "detail": message})
        return error_response(422, "validation_error", message)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # FastAPI's "error parsing the body": a bad body, like the rest
            message = f"the request body could not be decoded: {exc.detail}"
            log.info("invalid request", extra={"status": 422, "detail": message})
            return error_response(422, "validation_error", message)
        code = _STATUS_CODES.get(exc.status_code, "error")
        log.info(
            "http error", extra={"status": exc.status_code, "code": code, "detail": exc.detail}
        )
        message = str(exc.detail) if exc.status_code < 500 else GENERIC_SERVER_MESSAGE
        return error_response(exc.status_code, code, message, exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Normally the request-context middleware answers first (with the request id); this
        # is the last resort should an exception escape it.
        log.exception("unhandled error")
        return internal_error_response()
