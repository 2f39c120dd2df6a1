"""The public routes: liveness, readiness and token issue. Everything else needs a token."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import JSONResponse

from app.api.deps import (
    Audit,
    ClientIp,
    LoginGuardDep,
    OcrProblem,
    ReadinessChecks,
    SingleSignOnDep,
    TokenCodecDep,
    Users,
    require_form_urlencoded,
)
from app.api.errors import ApiError, error_responses
from app.api.schemas import HealthOut, StatusOut, TokenOut
from app.errors import AuthenticationFailed
from app.services.login import log_in
from app.services.readiness import readiness_problems

router = APIRouter()


@router.get("/health", response_model=HealthOut, tags=["ops"])
def health() -> HealthOut:
    """Liveness: the process answers (the body is exactly `{"status": "ok"}`)."""
    return HealthOut()


@router.get(
    "/ready",
    response_model=StatusOut,
    tags=["ops"],
    responses={503: {"model": StatusOut, "description": "a component is not ready"}},
)
def ready(request: Request, checks: ReadinessChecks, ocr: OcrProblem) -> JSONResponse:
    """Readiness: models loaded and every store reachable, else 503 naming what is not.

    `features.ocr` says whether scans and images can be read; without Tesseract the service
    still serves everything else, so it does not make the service unready.
    """
    problems = readiness_problems(checks, loaded=bool(request.app.state.ready))
    features = {"ocr": "available" if ocr is None else f"unavailable: {ocr}"}
    if problems:
        return JSONResponse(
            {"status": "not_ready", "detail": problems, "features": features}, status_code=503
        )
    return JSONResponse({"status": "ok", "detail": {}, "features": features})


@router.post(
    "/auth/token",
    response_model=TokenOut,
    tags=["auth"],
    dependencies=[Depends(require_form_urlencoded)],
    responses=error_responses(400, 401, 413, 415, 422, 429),
)
def issue_token(
    guard: LoginGuardDep,
    codec: TokenCodecDep,
    audit: Audit,
    users: Users,
    sso: SingleSignOnDep,
    client: ClientIp,
    username: Annotated[str, Form(min_length=1, max_length=128)],
    password: Annotated[str, Form(min_length=1, max_length=1024)],
    tenant: Annotated[
        str | None,
        Form(
            max_length=128,
            description="your organisation (tenant id); needed only when your user name is "
            "used in more than one organisation (400 `tenant_required` says so, and only "
            "to a right password)",
        ),
    ] = None,
) -> TokenOut:
    """OAuth2 password grant: a bearer token for valid credentials, one generic 401 otherwise
    (400 `tenant_required` for a right password of a name several tenants have, given without
    `tenant`; 429 `account_locked` for a client new to an account that failed too often
    today)."""
    try:
        token = log_in(
            guard,
            codec,
            audit,
            users,
            username,
            password,
            client,
            tenant=tenant,
            password_allowed=sso.password_allowed,
        )
    except AuthenticationFailed as exc:
        raise ApiError(401, "unauthorized", exc.message, {"WWW-Authenticate": "Bearer"}) from None
    return TokenOut(access_token=token.access_token, expires_in=token.expires_in)
