"""Groups of the caller's tenant and their members (admins). A group is the usual holder of
collection grants; a sign-on provider's groups map onto these by name."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.access import Authorized
from app.api.collection_schemas import GroupIn, GroupOut, GroupPatch
from app.api.deps import AccessStoreDep, ClientIp, CollectionServiceDep
from app.api.errors import ApiError, error_responses
from app.api.records import Page
from app.services.audit import Actor
from app.services.collections import CollectionService
from app.storage.collections import GroupMembers

router = APIRouter(prefix="/groups", tags=["groups"], responses=error_responses(403, 422))

_PATH = "/{group_id}"


@router.post("", status_code=201, response_model=GroupOut, responses=error_responses(409))
def create_group(
    body: GroupIn, collections: CollectionServiceDep, caller: Authorized, ip: ClientIp
) -> GroupOut:
    """A new group (409 when the name is taken)."""
    group = collections.create_group(
        tenant_id=caller.tenant_id,
        actor=caller.actor(ip),
        name=body.name,
        description=body.description,
    )
    return GroupOut.model_validate(GroupMembers(group, []))


@router.get("", response_model=Page[GroupOut])
def list_groups(access_store: AccessStoreDep, caller: Authorized) -> Page[GroupOut]:
    """Every group of your tenant by name, with its members."""
    groups = access_store.groups(caller.tenant_id)
    return Page[GroupOut].of(groups, len(groups))


@router.get(_PATH, response_model=GroupOut, responses=error_responses(404))
def get_group(group_id: str, collections: CollectionServiceDep, caller: Authorized) -> GroupOut:
    """One group (by id or name) and its members."""
    return GroupOut.model_validate(
        collections.group(tenant_id=caller.tenant_id, id_or_name=group_id)
    )


@router.patch(_PATH, response_model=GroupOut, responses=error_responses(404, 409))
def change_group(
    group_id: str,
    body: GroupPatch,
    collections: CollectionServiceDep,
    caller: Authorized,
    ip: ClientIp,
) -> GroupOut:
    """Rename or re-describe a group."""
    if body.name is None and body.description is None:
        raise ApiError(422, "validation_error", "nothing to change: send name or description")
    changed = collections.change_group(
        tenant_id=caller.tenant_id,
        actor=caller.actor(ip),
        id_or_name=group_id,
        name=body.name,
        description=body.description,
    )
    found = collections.group(tenant_id=caller.tenant_id, id_or_name=changed.group_id)
    return GroupOut.model_validate(found)


@router.delete(_PATH, status_code=204, responses=error_responses(404))
def delete_group(
    group_id: str, collections: CollectionServiceDep, caller: Authorized, ip: ClientIp
) -> Response:
    """Delete a group with its memberships and grants (in effect on the next request)."""
    collections.delete_group(
        tenant_id=caller.tenant_id, actor=caller.actor(ip), id_or_name=group_id
    )
    return Response(status_code=204)


@router.put(_PATH + "/members/{user_id}", status_code=204, responses=error_responses(404))
def add_member(
    group_id: str, user_id: str, collections: CollectionServiceDep, caller: Authorized, ip: ClientIp
) -> Response:
    """Add a user of your tenant to a group (nothing happens if already a member)."""
    return _membership(collections, caller.actor(ip), group_id, user_id, member=True)


@router.delete(_PATH + "/members/{user_id}", status_code=204, responses=error_responses(404))
def remove_member(
    group_id: str, user_id: str, collections: CollectionServiceDep, caller: Authorized, ip: ClientIp
) -> Response:
    """Remove a user from a group (in effect on the next request of every process)."""
    return _membership(collections, caller.actor(ip), group_id, user_id, member=False)


def _membership(
    collections: CollectionService, actor: Actor, group_id: str, user_id: str, *, member: bool
) -> Response:
    collections.set_member(
        tenant_id=actor.tenant_id, actor=actor, id_or_name=group_id, user_id=user_id, member=member
    )
    return Response(status_code=204)
