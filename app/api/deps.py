"""Every dependency alias of the API in one place, so route signatures read like functions."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.api.errors import ApiError
from app.container import Container
from app.errors import AuthenticationFailed
from app.request_limits import DEFAULT_PAGE_SIZE, PAGE_SIZE_CEILING
from app.services.auth import Identity
from app.storage.rate_limit import retry_after_header

_bearer = HTTPBearer(
    auto_error=False,
    description="an access token from POST /auth/token, or an API key (`rag_...`) from "
    "POST /auth/keys",
)
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def get_container(request: Request) -> Container:
    """The process's components, created by the app's lifespan."""
    container: Container = request.app.state.container
    return container


ContainerDep = Annotated[Container, Depends(get_container)]


def get_principal(
    container: ContainerDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Identity:
    """The verified identity of the caller; 401 for a missing, invalid, expired or revoked
    token or key, or a disabled or deleted user."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise ApiError(401, "unauthorized", "missing bearer token", _CHALLENGE)
    try:
        return container.authenticator.authenticate(credentials.credentials)
    except AuthenticationFailed as exc:
        raise ApiError(401, "unauthorized", exc.message, _CHALLENGE) from None


Principal = Annotated[Identity, Depends(get_principal)]


def client_ip(request: Request) -> str:
    """The client's address as the trusted-proxy logic resolved it (app/api/forwarded.py)."""
    return request.client.host if request.client else "unknown"


ClientIp = Annotated[str, Depends(client_ip)]

FORM_URLENCODED = "application/x-www-form-urlencoded"


def require_form_urlencoded(request: Request) -> None:
    """415 for a body declared as anything but a urlencoded form (a login never needs JSON or
    multipart's file parts); with no Content-Type at all, validation names the missing fields."""
    declared = request.headers.get("content-type")
    if declared is not None and declared.split(";")[0].strip().lower() != FORM_URLENCODED:
        raise ApiError(415, "unsupported_media_type", f"send the credentials as {FORM_URLENCODED}")


def _limit(
    container: Container, key: str, per_minute: int, message: str = "too many requests; slow down"
) -> None:
    decision = container.rate_limiter.hit(key, per_minute)
    if not decision.allowed:
        raise ApiError(429, "rate_limited", message, {"Retry-After": retry_after_header(decision)})


def limit_queries(container: ContainerDep, principal: Principal) -> None:
    """429 when the caller exceeds the per-user query/search rate."""
    per_minute = container.settings.rate_limit_query_per_minute
    _limit(container, f"query:{principal.user_id}", per_minute)


def limit_pages(container: ContainerDep, principal: Principal) -> None:
    """429 when the caller exceeds the per-user rate of the cited-page routes."""
    per_minute = container.settings.rate_limit_pages_per_minute
    _limit(container, f"pages:{principal.user_id}", per_minute)


def limit_conversation_starts(container: ContainerDep, principal: Principal) -> None:
    """429 when the caller starts conversations faster than the per-user rate."""
    per_minute = container.settings.rate_limit_conversations_per_minute
    _limit(
        container,
        f"conversation:{principal.user_id}",
        per_minute,
        "too many conversations started; slow down",
    )


def limit_key_creation(container: ContainerDep, principal: Principal) -> None:
    """429 when the caller makes API keys faster than the per-user rate."""
    per_minute = container.settings.rate_limit_keys_per_minute
    _limit(container, f"keys:{principal.user_id}", per_minute, "too many API keys made; slow down")


QueryRateLimit = Depends(limit_queries)
PageRateLimit = Depends(limit_pages)
ConversationRateLimit = Depends(limit_conversation_starts)
KeyCreationRateLimit = Depends(limit_key_creation)


# A listing's page: `limit` (None = the configured default, capped) and `offset`.
PageLimit = Annotated[
    int | None,
    Query(
        ge=1,
        le=PAGE_SIZE_CEILING,
        description=f"page size; default {DEFAULT_PAGE_SIZE} or the cap",
    ),
]
PageOffset = Annotated[int, Query(ge=0, le=10_000_000)]
