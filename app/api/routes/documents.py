"""Uploads, jobs and documents of the caller's tenant."""

from __future__ import annotations

import asyncio
import json
from functools import partial
from typing import Annotated, Literal, get_args

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from app.api.access import Authorized
from app.api.collection_schemas import DocumentPatch
from app.api.deps import (
    AccessStoreDep,
    CallerAccess,
    ClientIp,
    CollectionServiceDep,
    Documents,
    PageOffset,
    PageSize,
    Principal,
    Uploads,
)
from app.api.errors import ApiError, error_responses
from app.api.records import Page
from app.api.schemas import (
    DocumentField,
    DocumentOut,
    JobAccepted,
    JobOut,
    JobStatus,
    UploadAccepted,
    UploadUnchanged,
)
from app.api.upload import receive_uploads
from app.ingestion import SUPPORTED_EXTENSIONS
from app.jobs.store import JobRecord
from app.services import documents, sync_uploads, uploads
from app.services.auth import Identity
from app.services.collection_access import CollectionAccess, reads_everything_ever
from app.services.collections import CollectionService
from app.services.document_metadata import checked_metadata, parse_metadata
from app.services.indexing import DocumentDeps
from app.services.job_wait import MAX_WAIT_S, wait_for_job
from app.storage.collections import AccessStore
from app.storage.documents import DocumentFilter, DocumentRecord

router = APIRouter(tags=["documents"])
# The text fields that place an upload: its collection (id or name) and its metadata (JSON).
PLACEMENT_FIELDS = ("collection", "metadata")
# Files one upload request may carry (each becomes a job and takes a slot of the queue quota).
MAX_FILES_PER_REQUEST = 100
# A request declaring at most this many bytes (and no more than the upload limit, so an oversize
# body from a tenant with a full queue is still refused 429 before it is read) is read before it
# takes its job slots.
SMALL_REQUEST_BYTES = 256 * 1024

_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {
                            "description": "one file, or the field repeated for several",
                            "oneOf": [
                                {"type": "string", "format": "binary"},
                                {
                                    "type": "array",
                                    "items": {"type": "string", "format": "binary"},
                                    "maxItems": MAX_FILES_PER_REQUEST,
                                },
                            ],
                        },
                        "source_path": {
                            "type": "string",
                            "description": "the document name as a relative path "
                            "('dir/file.pdf'), instead of the file name (one file only)",
                        },
                        "sync_root": {
                            "type": "string",
                            "maxLength": sync_uploads.MAX_SYNC_ROOT_CHARS,
                            "description": "the label of the synced folder it comes from",
                        },
                        "sha256": {
                            "type": "string",
                            "pattern": "^[0-9a-f]{64}$",
                            "description": "the file's content hash: a document that already "
                            "has it indexed answers 200 unchanged and nothing is queued",
                        },
                    },
                }
            }
        },
    }
}


def _shown_status(job: JobRecord) -> Literal["queued", "processing", "done", "failed"]:
    # A reservation is an upload still being received: never handed to a client as a job.
    status = job.status
    assert status != "reserved", "a reservation is not a job yet"
    return status


@router.post(
    "/documents",
    status_code=202,
    response_model=UploadAccepted | UploadUnchanged,
    openapi_extra=_UPLOAD_BODY,
    responses={
        200: {"model": UploadUnchanged, "description": "the content is already indexed"},
        **error_responses(403, 413, 415, 422, 429),
    },
)
async def upload_document(
    request: Request,
    response: Response,
    caller: Authorized,
    deps: Uploads,
    ip: ClientIp,
    access: CallerAccess,
    collections: CollectionServiceDep,
    document_deps: Documents,
) -> UploadAccepted | UploadUnchanged:
    """Accept files (multipart field `file`, repeated for several; one job each) and queue them
    for background indexing. All files of a request are accepted, or none. A member may replace
    only documents they uploaded (403). With one file, `source_path` names the document by its
    path in a synced folder, `sync_root` labels it with that folder, and `sha256` lets a
    document that already has this content answer 200 `unchanged` without queueing anything."""
    tenant = caller.tenant_id
    uploader = _uploader(caller, ip)
    # A large request's first job slot is taken before the body is read, each further one before
    # its file is written: a tenant over its queue quota gets 429 and nothing reaches the disk.
    # A small one is read first and takes its slots as its jobs are queued (one transaction
    # instead of two per upload); refused, it leaves nothing on disk either.
    small = _declared_bytes(request) <= min(SMALL_REQUEST_BYTES, deps.max_upload_bytes)
    reservations: list[str] = []
    if not small:
        reserved = await run_in_threadpool(
            uploads.reserve_upload, deps, tenant_id=tenant, uploader=uploader
        )
        reservations.append(reserved)

    def reserve_next() -> None:  # runs in the receiver's worker thread
        reservations.append(uploads.reserve_upload(deps, tenant_id=tenant, uploader=uploader))

    # Which text fields to read: a sync's, and the collection and metadata of the documents.
    texts = dict.fromkeys((*sync_uploads.SYNC_FIELDS, *PLACEMENT_FIELDS), "")
    received: list[uploads.ReceivedFile] = []
    try:
        received = await receive_uploads(
            request,
            dest_dir=deps.uploads_dir,
            max_bytes=deps.max_upload_bytes,
            accept_suffix=SUPPORTED_EXTENSIONS,
            max_files=MAX_FILES_PER_REQUEST,
            reserve_slot=None if small else reserve_next,
            texts=texts,
        )
        fields = sync_uploads.SyncFields.parse(texts, len(received))
    except BaseException:  # 413/415/422/429 or a client gone mid-body: files and slots go
        discard = run_in_threadpool(
            uploads.discard_uploads,
            deps,
            tenant_id=tenant,
            reservations=reservations,
            files=received,
        )
        await asyncio.shield(discard)  # completes even if this request is being cancelled
        raise

    def place_and_submit() -> list[JobRecord] | sync_uploads.Unchanged:
        """Where the files go (403/404/422: files and slots go), then hashing the files, writing
        the job rows and handing them to the workers (maybe Redis): all of it blocks, so one
        worker thread does it, off the event loop."""
        try:
            placement, found = _placement(
                collections,
                document_deps,
                access,
                caller,
                texts,
                received,
                fields.source_path,
            )
        except BaseException:
            uploads.discard_uploads(
                deps, tenant_id=tenant, reservations=reservations, files=received
            )
            raise
        return sync_uploads.submit_sync_upload(
            deps,
            tenant_id=tenant,
            reservations=None if small else reservations,
            files=received,
            # Checked by `_placement` for every document replaced (those of the same names in
            # the collection).
            uploader=documents.Uploader(caller.actor(ip), may_change_any=True),
            fields=fields,
            placement=placement,
            found=found,
        )

    submitted = await run_in_threadpool(place_and_submit)
    if isinstance(submitted, sync_uploads.Unchanged):
        response.status_code = 200
        return UploadUnchanged(document_id=submitted.document_id, source=submitted.source)
    jobs = submitted
    accepted = [
        JobAccepted(
            job_id=job.job_id,
            document_id=job.document_id,
            status=_shown_status(job),
            source=job.source,
        )
        for job in jobs
    ]
    return UploadAccepted(**accepted[0].model_dump(), jobs=accepted)


def _declared_bytes(request: Request) -> int:
    """The request body's declared length; unknown (chunked) or malformed counts as large."""
    declared = request.headers.get("content-length", "")
    return int(declared) if declared.isdigit() else SMALL_REQUEST_BYTES + 1


def _placement(
    collections: CollectionService,
    document_deps: DocumentDeps,
    access: CollectionAccess,
    caller: Identity,
    texts: dict[str, str],
    files: list[uploads.ReceivedFile],
    source_path: str | None = None,
) -> tuple[dict[str, str], dict[str, DocumentRecord | None]]:
    """The document rows' collection and metadata: the upload's `collection` (default general;
    403 unless the caller writes it) and `metadata` (422 naming the problem); and the documents
    found by the files' names there. Each document of the same name in that collection is
    replaced, so the caller must be allowed to change it; a name in another collection is
    another document, and nothing about it is looked at."""
    metadata = parse_metadata(texts.get("metadata"))
    target = collections.upload_target(access, texts.get("collection"))
    found: dict[str, DocumentRecord | None] = {}
    for file in files:
        source = source_path or uploads.sanitise_filename(file.client_filename)
        existing = found[source] = document_deps.documents.find(caller.tenant_id, target, source)
        if existing is not None:
            collections.check_replace(access, target, existing.uploaded_by, user_id=caller.user_id)
    placement = {"collection_id": target}
    if "metadata" in texts:
        placement["metadata_json"] = json.dumps(metadata, sort_keys=True)
    return placement, found


@router.get("/jobs", response_model=Page[JobOut], responses=error_responses(422))
def list_jobs(
    principal: Principal,
    deps: Uploads,
    size: PageSize,
    access: CallerAccess,
    status: Annotated[
        list[JobStatus] | None,
        Query(description="keep jobs in these statuses (repeat it); default: every status"),
    ] = None,
    offset: PageOffset = 0,
) -> Page[JobOut]:
    """The tenant's jobs (ingestion, and `collection_delete`), newest first.
    `?status=queued&status=processing` is what is still to do: a client syncing a folder polls
    that one listing until its `count` is 0."""
    statuses = status or list(get_args(JobStatus))
    shown = None if reads_everything_ever(principal.role, access) else access.readable
    found = uploads.list_jobs(
        deps,
        tenant_id=principal.tenant_id,
        statuses=statuses,
        limit=size,
        offset=offset,
        collections=shown,
        user_id=None if access.key_limited else principal.user_id,
        every_run=access.reads_everything,
    )
    return Page[JobOut].of(found.records, found.total)


def _check_job_readable(
    access_store: AccessStore, access: CollectionAccess, principal: Identity, job: JobRecord
) -> None:
    """404 unless the caller may see the tenant's job (its document's collection, or the
    collection it deletes, is one they read; or they asked for it)."""
    if reads_everything_ever(principal.role, access):
        return
    if not uploads.job_readable(
        job,
        lambda collection_id: access.permission(collection_id) is not None,
        user_id=None if access.key_limited else principal.user_id,
        collection_of=lambda document_id: access_store.collection_of(
            principal.tenant_id, document_id
        ),
        every_run=access.reads_everything,
    ):
        raise ApiError(404, "not_found", "job not found")


@router.get("/jobs/{job_id}", response_model=JobOut, responses=error_responses(404, 422))
async def get_job(
    job_id: str,
    principal: Principal,
    deps: Uploads,
    access_store: AccessStoreDep,
    access: CallerAccess,
    wait: Annotated[
        float,
        Query(
            ge=0,
            le=MAX_WAIT_S,
            description="seconds to wait for the job to end (done or failed) before answering; "
            "it answers as soon as the job ends, or with its state then (default 0: at once)",
        ),
    ] = 0,
) -> JobOut:
    """A job's state and progress (an upload's indexing, or a collection's deletion: `kind`);
    with `wait`, once it has ended (long poll). 404, as for a missing job, when its document is
    in a collection you do not read (at once)."""
    job = await wait_for_job(
        deps,
        tenant_id=principal.tenant_id,
        job_id=job_id,
        wait_s=wait,
        # On the first read, before any wait: 404 at once.
        check=partial(_check_job_readable, access_store, access, principal),
    )
    return JobOut.model_validate(job)


@router.get("/documents", response_model=Page[DocumentOut], responses=error_responses(404, 422))
def list_documents(
    principal: Principal,
    deps: Documents,
    size: PageSize,
    access: CallerAccess,
    collections: CollectionServiceDep,
    offset: PageOffset = 0,
    source_prefix: Annotated[
        str | None,
        Query(max_length=255, description="keep documents whose name starts with this"),
    ] = None,
    sync_root: Annotated[
        str | None,
        Query(max_length=100, description="keep documents a sync of this folder label uploaded"),
    ] = None,
    collection: Annotated[
        str | None,
        Query(max_length=64, description="keep documents of this collection (id or name)"),
    ] = None,
    fields: Annotated[
        list[DocumentField] | None,
        Query(description="return only these fields of each document (repeat it)"),
    ] = None,
) -> Page[DocumentOut] | JSONResponse:
    """The documents of the collections you read, newest first; with `source_prefix`,
    `sync_root` or `collection` (404 unless you read it), those it keeps, by name.
    `fields=source&fields=content_sha256&fields=document_id` is the cheap listing a folder
    sync compares its files with."""
    tenant = principal.tenant_id
    shown = None if access.reads_everything else access.readable
    collection_id = None
    if collection is not None:
        collection_id = collections.readable(access, collection).collection_id
    if source_prefix is None and sync_root is None and collection_id is None:
        found = documents.list_documents(
            deps, tenant_id=tenant, limit=size, offset=offset, collections=shown
        )
    else:
        wanted = DocumentFilter(source_prefix, sync_root, collection_id)
        # Only what the caller reads, inside the query: a total counted past it would spell
        # out the names of hidden documents one prefix at a time.
        found = sync_uploads.list_matching(
            deps, tenant_id=tenant, wanted=wanted, limit=size, offset=offset, collections=shown
        )
    # Each document shows its collection's name as the caller sees it.
    names = {"collection_names": access.all_collections}
    listed = Page[DocumentOut].of(found.records, found.total, context=names)
    if not fields:
        return listed
    kept: set[str] = set(fields)
    chosen = [d.model_dump(mode="json", include=kept) for d in listed.data]
    return JSONResponse({"data": chosen, "count": listed.count})


@router.get(
    "/documents/{document_id}", response_model=DocumentOut, responses=error_responses(404, 422)
)
def get_document(
    document_id: str,
    principal: Principal,
    deps: Documents,
    access: CallerAccess,
    collections: CollectionServiceDep,
) -> DocumentOut:
    """One document of a collection you read (404 otherwise, as for a missing one)."""
    collections.document_collection(access, document_id=document_id)
    found = documents.get_document(deps, tenant_id=principal.tenant_id, document_id=document_id)
    return DocumentOut.model_validate(found, context={"collection_names": access.all_collections})


@router.patch(
    "/documents/{document_id}",
    response_model=DocumentOut,
    responses=error_responses(403, 404, 409, 422),
)
def change_document(
    document_id: str,
    body: DocumentPatch,
    caller: Authorized,
    deps: Documents,
    access: CallerAccess,
    collections: CollectionServiceDep,
    ip: ClientIp,
) -> DocumentOut:
    """Move a document to another collection (`collection`: id or name) and/or replace its
    metadata (`metadata`), without re-embedding it. You need write on its collection and, to
    move it, on the target; a target that already holds a document of its name is a 409. Its
    id stays the same."""
    if body.collection is None and body.metadata is None:
        raise ApiError(422, "validation_error", "nothing to change: send collection or metadata")
    metadata = None if body.metadata is None else checked_metadata(body.metadata)
    collections.document_collection(access, document_id=document_id)  # 404 before anything else
    found = documents.get_document(deps, tenant_id=caller.tenant_id, document_id=document_id)
    collections.change_document(
        access,
        caller.actor(ip),
        document_id=document_id,
        uploaded_by=found.uploaded_by,
        collection=body.collection,
        metadata=metadata,
    )
    changed = documents.get_document(deps, tenant_id=caller.tenant_id, document_id=document_id)
    return DocumentOut.model_validate(changed, context={"collection_names": access.all_collections})


@router.delete(
    "/documents/{document_id}", status_code=204, responses=error_responses(403, 404, 422, 503)
)
def delete_document(
    document_id: str,
    caller: Authorized,
    deps: Documents,
    ip: ClientIp,
    access: CallerAccess,
    collections: CollectionServiceDep,
) -> Response:
    """Delete a document; no search or answer can reach it afterwards. A member may delete only
    documents they uploaded (403); an admin any."""
    collection_id = collections.document_collection(access, document_id=document_id)
    found = documents.get_document(deps, tenant_id=caller.tenant_id, document_id=document_id)
    collections.check_may_delete(
        access, document_id=document_id, uploaded_by=found.uploaded_by, user_id=caller.user_id
    )
    uploader = documents.Uploader(caller.actor(ip), access.may_change_any(collection_id))
    documents.delete_document(
        deps, tenant_id=caller.tenant_id, document_id=document_id, uploader=uploader
    )
    return Response(status_code=204)


def _uploader(caller: Identity, ip: str) -> documents.Uploader:
    return documents.Uploader(caller.actor(ip), may_change_any=caller.role == "admin")
