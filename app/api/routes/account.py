"""The caller's own account: who am I, sign out, change password, API keys."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse

from app.api.access import Authorized
from app.api.admin_schemas import (
    KeyCreatedOut,
    KeyIn,
    KeyList,
    LogoutIn,
    MeOut,
    PasswordChangeIn,
)
from app.api.deps import (
    ApiKeys,
    AuthenticatorDep,
    CallerAccess,
    ClientIp,
    KeyCreationRateLimit,
    LoginGuardDep,
    SearchScopesDep,
    SingleSignOnDep,
    Users,
)
from app.api.errors import error_responses

router = APIRouter(prefix="/auth", tags=["auth"], responses=error_responses(403))


@router.get("/me", response_model=MeOut)
def me(caller: Authorized) -> MeOut:
    """Who this credential acts as, and with which role (the web app hides what it may not do)."""
    return MeOut(
        user_id=caller.user_id,
        username=caller.username,
        tenant_id=caller.tenant_id,
        role=caller.role,
        credential="key" if caller.key_id else "token",
        key_id=caller.key_id,
        scopes=list(caller.scopes),
    )


@router.post("/logout", status_code=204, responses=error_responses(409, 422))
def log_out(
    caller: Authorized,
    authenticator: AuthenticatorDep,
    sso: SingleSignOnDep,
    ip: ClientIp,
    all: Annotated[
        bool, Query(description="sign out every session of the user (API keys stay valid)")
    ] = False,
    body: LogoutIn | None = None,
) -> Response:
    """Revoke the presented access token on every API process until it expires; with
    `all=true`, every token of the user issued so far. An API key is revoked with
    DELETE /auth/keys/{key_id} instead (409 without `all=true`). When the tenant signs in
    through a provider that has an end-session URL, the answer is 200
    `{"end_session_url": ...}`: open it to sign out of the provider too. A body with any
    field (`{"all": true}`) is a 422: `all` is a query parameter."""
    authenticator.log_out(caller, caller.actor(ip), everywhere=all)
    end_session = sso.end_session_url(caller.tenant_id)
    if end_session is not None:
        return JSONResponse({"end_session_url": end_session})
    return Response(status_code=204)


@router.post("/password", status_code=204, responses=error_responses(401, 422, 429))
def change_password(
    body: PasswordChangeIn,
    caller: Authorized,
    guard: LoginGuardDep,
    users: Users,
    ip: ClientIp,
) -> Response:
    """Change your password (the current one is checked); every session and API key of yours
    ends, this one included: log in again. Not with an API key (403 `api_key_not_allowed`)."""
    guard.check_current_password(
        user_id=caller.user_id,
        check=lambda: users.change_own_password(
            caller.actor(ip), body.current_password, body.new_password
        ),
    )
    return Response(status_code=204)


@router.post(
    "/keys",
    status_code=201,
    response_model=KeyCreatedOut,
    responses=error_responses(404, 413, 422, 429),  # 404: a collection it names is not yours
    dependencies=[KeyCreationRateLimit],
)
def create_key(
    body: KeyIn,
    caller: Authorized,
    keys: ApiKeys,
    ip: ClientIp,
    access: CallerAccess,
    search_scopes: SearchScopesDep,
) -> KeyCreatedOut:
    """A new API key: send it as `Authorization: Bearer <key>` (also as the OpenAI SDK's
    `api_key`). Its role is at most yours (403 otherwise); the key is shown only here. Made
    by a signed-in person; an API key may make one only with the `keys:manage` scope (403
    `api_key_not_allowed` otherwise), and the new key expires no later than it. 413
    `quota_exceeded` at RAG_MAX_KEYS_PER_USER working keys."""
    limit = None
    if body.collections is not None:  # each one the caller reads now (404 like a missing one)
        limit = sorted(search_scopes.chosen_collections(access, body.collections))
    issued = keys.create(
        caller, caller.actor(ip), body.name, body.role, body.expires_in_days, body.scopes, limit
    )
    return KeyCreatedOut.model_validate({**asdict(issued.record), "key": issued.key})


@router.get("/keys", response_model=KeyList, responses=error_responses(422))
def list_keys(
    caller: Authorized,
    keys: ApiKeys,
    all: Annotated[bool, Query(description="every key of the tenant (admins only)")] = False,
) -> KeyList:
    """Your API keys (never the keys themselves), newest first."""
    return KeyList.model_validate({"data": keys.list(caller, everyone=all)})


@router.delete("/keys/{key_id}", status_code=204, responses=error_responses(404, 422))
def revoke_key(key_id: str, caller: Authorized, keys: ApiKeys, ip: ClientIp) -> Response:
    """Revoke one of your keys (an admin: any key of the tenant) and every key made from it;
    refused at once by every API process. Needs a signed-in person, or a key with the
    `keys:manage` scope (403 `api_key_not_allowed`)."""
    keys.revoke(caller, caller.actor(ip), key_id=key_id)
    return Response(status_code=204)
