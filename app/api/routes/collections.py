"""Collections of the caller's tenant and who may read, write and manage each (grants).

Every route takes a collection's id or its name. A collection the caller may not read is a 404
exactly like a missing one; one it reads but may not manage is a 403.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse

from app.api.access import Authorized
from app.api.collection_schemas import (
    AccessOut,
    CollectionDeleting,
    CollectionIn,
    CollectionOut,
    CollectionPatch,
    GrantsIn,
)
from app.api.deps import (
    CallerAccess,
    ClientIp,
    CollectionServiceDep,
    JobQueueDep,
    JobStoreDep,
)
from app.api.errors import ApiError, error_responses
from app.api.records import Page
from app.services.collection_deletion import queue_collection_deletion
from app.services.collections import CollectionView
from app.storage.collections import CollectionChange

router = APIRouter(prefix="/collections", tags=["collections"], responses=error_responses(422))

_PATH = "/{collection_id}"


@router.post("", status_code=201, response_model=CollectionOut, responses=error_responses(403, 409))
def create_collection(
    body: CollectionIn,
    collections: CollectionServiceDep,
    caller: Authorized,
    access: CallerAccess,
    ip: ClientIp,
) -> CollectionOut:
    """A new collection (admins). `tenant`: every user of the tenant reads it; `restricted`:
    only its grants. 409 when the name is taken; 403, whatever the name, for an API key that
    does not read every collection (a taken name would name one it may not see)."""
    created = collections.create(
        access, caller.actor(ip), body.name, body.description, body.visibility
    )
    return CollectionOut.model_validate(CollectionView(created, 0, 0, "manage"))


@router.get("", response_model=Page[CollectionOut])
def list_collections(
    collections: CollectionServiceDep, access: CallerAccess
) -> Page[CollectionOut]:
    """The collections you may read, with their document and chunk counts and your
    permission on each."""
    views = collections.readable_views(access)
    return Page[CollectionOut].of(views, len(views))


@router.get(_PATH, response_model=CollectionOut, responses=error_responses(404))
def get_collection(
    collection_id: str, collections: CollectionServiceDep, access: CallerAccess
) -> CollectionOut:
    """One collection you read (by id or name)."""
    return CollectionOut.model_validate(collections.view(access, collection_id))


@router.patch(_PATH, response_model=CollectionOut, responses=error_responses(403, 404, 409))
def change_collection(
    collection_id: str,
    body: CollectionPatch,
    collections: CollectionServiceDep,
    caller: Authorized,
    access: CallerAccess,
    ip: ClientIp,
) -> CollectionOut:
    """Rename, re-describe or change the visibility of a collection you manage. Renaming needs
    read access to every collection (403 otherwise, whatever the name): names are unique in the
    tenant, and a taken name's 409 would name a collection you may not see."""
    if body.name is None and body.description is None and body.visibility is None:
        raise ApiError(
            422, "validation_error", "nothing to change: send name, description or visibility"
        )
    change = CollectionChange(body.name, body.description, body.visibility)
    changed = collections.change(access, caller.actor(ip), collection_id, change)
    fresh = collections.access(
        tenant_id=caller.tenant_id,
        user_id=caller.user_id,
        role=caller.role,
        key_collections=caller.collections,
    )
    return CollectionOut.model_validate(collections.view(fresh, changed.collection_id))


@router.delete(
    _PATH,
    status_code=204,
    responses={
        202: {"model": CollectionDeleting, "description": "its documents are being deleted"},
        **error_responses(403, 404, 409),
    },
)
def delete_collection(
    collection_id: str,
    collections: CollectionServiceDep,
    jobs: JobStoreDep,
    job_queue: JobQueueDep,
    caller: Authorized,
    access: CallerAccess,
    ip: ClientIp,
    documents: Annotated[
        Literal["keep", "delete"] | None,
        Query(description="`delete`: delete its documents first, as a job (GET /jobs/{job_id})"),
    ] = None,
) -> Response:
    """Delete a collection you manage. One that holds documents is a 409 unless
    `?documents=delete`, which answers 202 with a durable job (`GET /jobs/{job_id}`, also after
    a restart) that deletes them, then the collection; asked again meanwhile, the same job."""
    actor = caller.actor(ip)
    if documents != "delete":
        if not collections.delete(access, actor, collection_id):
            raise ApiError(
                409,
                "conflict",
                "the collection holds documents: move them, or DELETE with ?documents=delete",
            )
        return Response(status_code=204)
    job = queue_collection_deletion(collections, jobs, job_queue, access, actor, collection_id)
    if job is None:
        return Response(status_code=204)
    body = CollectionDeleting(
        collection_id=job.collection_id or collection_id,
        status="deleting",
        documents=job.progress_total,
        job_id=job.job_id,
    )
    return JSONResponse(
        body.model_dump(), status_code=202, headers={"Location": f"/jobs/{job.job_id}"}
    )


@router.get(_PATH + "/access", response_model=AccessOut, responses=error_responses(403, 404))
def get_access(
    collection_id: str, collections: CollectionServiceDep, access: CallerAccess
) -> AccessOut:
    """Who may read, write or manage a collection you manage."""
    return AccessOut.model_validate(collections.grants(access, collection_id))


@router.put(_PATH + "/access", response_model=AccessOut, responses=error_responses(403, 404))
def put_access(
    collection_id: str,
    body: GrantsIn,
    collections: CollectionServiceDep,
    caller: Authorized,
    access: CallerAccess,
    ip: ClientIp,
) -> AccessOut:
    """Replace a collection's grants (groups and users by id; a group also by name). In effect
    on the next request of every process."""
    grants = [item.as_grant() for item in body.grants]
    found = collections.set_grants(access, caller.actor(ip), collection_id, grants)
    return AccessOut.model_validate(collections.grants(access, found.collection_id))
