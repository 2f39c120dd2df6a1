"""Single sign-on: the tenant's provider (PUT/GET/DELETE /sso, admins, people only) and the
public sign-in routes of the web app's Authorization Code flow.

The callback answers a person's browser, so its failures are a small page in words, never a
JSON body or a trace. Its success redirects to the web app with a one-time code in the URL
fragment (`#sso_code=`), which browsers do not send to servers or in Referer headers; the page
trades it at POST /auth/sso/exchange for the service's own token.
"""

from __future__ import annotations

import html
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel, Field

from app.api.access import Authorized
from app.api.deps import ClientIp, RateLimiterDep, SettingsDep, SingleSignOnDep
from app.api.errors import ApiError, error_responses
from app.api.routes.web import APP_SECURITY_HEADERS
from app.api.schemas import TokenOut
from app.errors import AuthenticationFailed, KeyNotAllowed, ProviderUnreachable, SsoFailure
from app.services.audit import Actor
from app.services.auth import Identity
from app.services.login import client_bucket
from app.services.sso.config import SsoSettingsIn
from app.storage.rate_limit import retry_after_header

CALLBACK_PATH = "/auth/sso/callback"

# The browser routes answer a person: a redirect, or a page that says what went wrong.
_PAGE_RESPONSES: dict[int | str, dict[str, Any]] = {
    302: {"description": "on to the provider, or back to the web app"},
    **{
        status: {"description": what, "content": {"text/html": {}}}
        for status, what in (
            (400, "a page: the sign-in cannot go on (a bad next, an expired state or code)"),
            (401, "a page: the provider's answer could not be verified"),
            (403, "a page: refused (consent denied, no mapped role, disabled, domain)"),
            (404, "a page: the organisation signs in with no provider"),
            (409, "a page: the user name is another account's"),
            (429, "a page: too many sign-ins started from this client"),
            (503, "a page: the provider cannot be reached"),
        )
    },
    **error_responses(422),  # a malformed query is refused before any page, as JSON
}

admin_router = APIRouter(prefix="/sso", tags=["sso"], responses=error_responses(403, 404, 422))
public_router = APIRouter(tags=["sso"])


class SsoOptionOut(BaseModel):
    """What the sign-in page offers for an organisation."""

    tenant_id: str
    provider_name: str
    start_url: str
    password_login: bool


class ExchangeIn(BaseModel):
    code: str = Field(min_length=1, max_length=128)


def _person(caller: Identity, ip: str) -> Actor:
    if caller.is_key:
        raise KeyNotAllowed(
            "single sign-on is configured by a signed-in admin, not with an API key"
        )
    return caller.actor(ip)


@admin_router.put("", responses=error_responses(409, 503))
def put_sso(
    body: SsoSettingsIn, sso: SingleSignOnDep, caller: Authorized, ip: ClientIp
) -> dict[str, Any]:
    """Set your tenant's OpenID Connect provider (its discovery document is read to check the
    issuer). The client secret is stored encrypted and never shown again."""
    return sso.configure(tenant_id=caller.tenant_id, body=body, actor=_person(caller, ip))


@admin_router.get("")
def get_sso(sso: SingleSignOnDep, caller: Authorized) -> dict[str, Any]:
    """Your tenant's provider, without its secret (404 when it has none)."""
    return sso.describe(caller.tenant_id)


@admin_router.delete("", status_code=204)
def delete_sso(sso: SingleSignOnDep, caller: Authorized, ip: ClientIp) -> Response:
    """Stop signing in through the provider; its users stay (404 when there is none)."""
    sso.remove(tenant_id=caller.tenant_id, actor=_person(caller, ip))
    return Response(status_code=204)


@public_router.get(
    "/auth/sso/options", response_model=SsoOptionOut, responses=error_responses(404, 422)
)
def sso_option(
    sso: SingleSignOnDep,
    organisation: Annotated[str | None, Query(max_length=64)] = None,
    email: Annotated[str | None, Query(max_length=254)] = None,
) -> SsoOptionOut:
    """The provider the sign-in page offers for an organisation (tenant id), or for an email
    address whose domain exactly one organisation allows; 404 when there is none."""
    option = sso.option(tenant_id=organisation, email=email)
    return SsoOptionOut(
        tenant_id=option.tenant_id,
        provider_name=option.provider_name,
        # From the root, like every API path the web app resolves against its <base>.
        start_url=f"/auth/sso/{quote(option.tenant_id, safe='')}/start?next=/",
        password_login=option.password_login,
    )


@public_router.get(
    "/auth/sso/{tenant}/start",
    name="sso_start",
    status_code=302,
    response_class=RedirectResponse,
    responses=_PAGE_RESPONSES,
)
def sso_start(
    request: Request,
    settings: SettingsDep,
    rate_limiter: RateLimiterDep,
    sso: SingleSignOnDep,
    ip: ClientIp,
    tenant: str,
    next: Annotated[str, Query(max_length=512)] = "/",
) -> Response:
    """Send the browser to the tenant's provider (state, nonce and an S256 code challenge).
    Each start counts against the client's login budget (RAG_RATE_LIMIT_AUTH_PER_MINUTE): it
    stores a sign-in in flight, so a flood must not fill that table."""
    budget = settings.rate_limit_auth_per_minute
    decision = rate_limiter.hit(f"sso-start:{client_bucket(ip)}", budget)
    if not decision.allowed:
        page = _page(
            "Too many sign-ins were started from your network just now. Wait a minute, then "
            "try again.",
            429,
        )
        page.headers["Retry-After"] = retry_after_header(decision)
        return page
    redirect_uri = str(request.url_for("sso_callback"))
    try:
        target = sso.start(tenant_id=tenant[:64], next_path=next, redirect_uri=redirect_uri)
    except (SsoFailure, ProviderUnreachable) as exc:
        return _failure_page(exc)
    return RedirectResponse(target, status_code=302, headers={"Cache-Control": "no-store"})


@public_router.get(
    CALLBACK_PATH,
    name="sso_callback",
    status_code=302,
    response_class=RedirectResponse,
    responses=_PAGE_RESPONSES,
)
def sso_callback(
    request: Request,
    sso: SingleSignOnDep,
    ip: ClientIp,
    state: Annotated[str | None, Query(max_length=256)] = None,
    code: Annotated[str | None, Query(max_length=2048)] = None,
    error: Annotated[str | None, Query(max_length=256)] = None,
) -> Response:
    """Where the provider sends the browser back: checks the state, trades the code (with the
    PKCE verifier), checks the ID token, provisions or updates the user, then redirects to the
    web app with a one-time code in the fragment."""
    try:
        finished = sso.complete(state, code, error, ip)
    except (SsoFailure, ProviderUnreachable) as exc:
        return _failure_page(exc)
    # A path, not a URL: the browser stays on the origin it called back, whatever Host said.
    prefix = str(request.scope.get("root_path", "")).rstrip("/")
    return RedirectResponse(
        f"{prefix}{finished.next_path}#sso_code={finished.exchange_code}",
        status_code=302,
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
    )


@public_router.post(
    "/auth/sso/exchange", response_model=TokenOut, responses=error_responses(401, 422)
)
def sso_exchange(body: ExchangeIn, sso: SingleSignOnDep) -> TokenOut:
    """Trade the one-time code of a finished sign-in (single use, valid 60 s) for an access
    token, in the same body POST /auth/token answers."""
    try:
        token = sso.exchange(body.code)
    except AuthenticationFailed as exc:
        raise ApiError(401, "unauthorized", exc.message, {"WWW-Authenticate": "Bearer"}) from None
    return TokenOut(access_token=token.access_token, expires_in=token.expires_in)


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign-in failed</title><link rel="stylesheet" href="/static/style.css"></head>
<body><main class="card narrow"><h1>Sign-in failed</h1>
<p role="alert">{message}</p>
<p><a href="/">Back to the sign-in page</a></p></main></body></html>
"""


def _failure_page(error: SsoFailure | ProviderUnreachable) -> HTMLResponse:
    # Only an unreachable provider is the service's problem (503); the rest are the request's.
    status = 503 if isinstance(error, ProviderUnreachable) else error.http_status
    return _page(error.message, status)


def _page(message: str, status: int) -> HTMLResponse:
    return HTMLResponse(
        _PAGE.format(message=html.escape(message)),
        status_code=status,
        headers={**APP_SECURITY_HEADERS, "Cache-Control": "no-store"},
    )
