"""User administration of the caller's tenant (admins only; another tenant's ids are 404)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.access import Authorized
from app.api.admin_schemas import UserIn, UserOut, UserPatch
from app.api.deps import ClientIp, PageOffset, PageSize, Users
from app.api.errors import ApiError, error_responses
from app.api.records import Page

router = APIRouter(prefix="/users", tags=["users"], responses=error_responses(403, 422))


@router.post("", status_code=201, response_model=UserOut, responses=error_responses(409))
def create_user(body: UserIn, caller: Authorized, users: Users, ip: ClientIp) -> UserOut:
    """Add a user to your tenant (409 if your tenant has the name already; 422
    `password_too_common` or `password_contains_username` for a weak password)."""
    user = users.create_user(
        tenant_id=caller.tenant_id,
        username=body.username,
        password=body.password,
        role=body.role,
        actor=caller.actor(ip),
    )
    return UserOut.model_validate(user)


@router.get("", response_model=Page[UserOut])
def list_users(
    caller: Authorized, users: Users, size: PageSize, offset: PageOffset = 0
) -> Page[UserOut]:
    """Your tenant's users by name."""
    found = users.page(tenant_id=caller.tenant_id, limit=size, offset=offset)
    return Page[UserOut].of(found.records, found.total)


@router.patch("/{user_id}", response_model=UserOut, responses=error_responses(404, 409))
def change_user(
    user_id: str, body: UserPatch, caller: Authorized, users: Users, ip: ClientIp
) -> UserOut:
    """Change a user's role, disable or enable it, or set its password. Disabling or a new
    password ends its sessions and deletes its API keys; the last enabled admin cannot be
    demoted or disabled (409)."""
    if body.role is None and body.disabled is None and body.password is None:
        raise ApiError(
            422, "validation_error", "nothing to change: send role, disabled or password"
        )
    user = users.change_user(
        caller.actor(ip),
        user_id=user_id,
        role=body.role,
        disabled=body.disabled,
        password=body.password,
    )
    return UserOut.model_validate(user)


@router.delete("/{user_id}", status_code=204, responses=error_responses(404, 409))
def delete_user(user_id: str, caller: Authorized, users: Users, ip: ClientIp) -> Response:
    """Delete a user and its API keys (its documents stay); not the last enabled admin (409)."""
    users.remove_user(caller.actor(ip), user_id=user_id)
    return Response(status_code=204)
