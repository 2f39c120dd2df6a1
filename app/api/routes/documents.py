"""Uploads, jobs and documents of the caller's tenant."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal, get_args

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from app.api.access import Authorized
from app.api.deps import ClientIp, Documents, PageOffset, PageSize, Principal, Uploads
from app.api.errors import error_responses
from app.api.schemas import (
    DocumentOut,
    JobAccepted,
    JobOut,
    JobStatus,
    Page,
    UploadAccepted,
)
from app.api.upload import receive_uploads
from app.ingestion import SUPPORTED_EXTENSIONS
from app.jobs.store import JobRecord
from app.services import documents, uploads
from app.services.auth import Identity

router = APIRouter(tags=["documents"])
# Files one upload request may carry (each becomes a job and takes a slot of the queue quota).
MAX_FILES_PER_REQUEST = 100

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
                        }
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
    response_model=UploadAccepted,
    openapi_extra=_UPLOAD_BODY,
    responses=error_responses(403, 413, 415, 422, 429),
)
async def upload_document(
    request: Request, caller: Authorized, deps: Uploads, ip: ClientIp
) -> UploadAccepted:
    """Accept files (multipart field `file`, repeated for several; one job each) and queue them
    for background indexing. All files of a request are accepted, or none. A member may replace
    only documents they uploaded (403)."""
    tenant = caller.tenant_id
    uploader = _uploader(caller, ip)
    # The first job slot is taken before the body is read, each further one before its file is
    # written: a tenant over its queue quota gets 429 and nothing reaches the disk.
    reservations = [
        await run_in_threadpool(uploads.reserve_upload, deps, tenant_id=tenant, uploader=uploader)
    ]

    def reserve_next() -> None:  # runs in the receiver's worker thread
        reservations.append(uploads.reserve_upload(deps, tenant_id=tenant, uploader=uploader))

    try:
        received = await receive_uploads(
            request,
            dest_dir=deps.uploads_dir,
            max_bytes=deps.max_upload_bytes,
            accept_suffix=SUPPORTED_EXTENSIONS,
            max_files=MAX_FILES_PER_REQUEST,
            reserve_slot=reserve_next,
        )
    except BaseException:  # 413/415/422/429 or a client gone mid-body: the slots are free again
        release = run_in_threadpool(_release_all, deps, tenant, reservations)
        await asyncio.shield(release)  # completes even if this request is being cancelled
        raise
    # Hashing the files, writing the job rows and handing them to the workers (maybe Redis)
    # block: keep them off the event loop.
    jobs = await run_in_threadpool(
        uploads.submit_uploads,
        deps,
        tenant_id=tenant,
        reservations=reservations,
        files=received,
        uploader=uploader,
    )
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


def _release_all(deps: uploads.UploadDeps, tenant: str, reservations: list[str]) -> None:
    for reservation in reservations:
        uploads.release_upload(deps, tenant_id=tenant, reservation=reservation)


@router.get("/jobs", response_model=Page[JobOut], responses=error_responses(422))
def list_jobs(
    principal: Principal,
    deps: Uploads,
    size: PageSize,
    status: Annotated[
        list[JobStatus] | None,
        Query(description="keep jobs in these statuses (repeat it); default: every status"),
    ] = None,
    offset: PageOffset = 0,
) -> Page[JobOut]:
    """The tenant's ingestion jobs, newest first. `?status=queued&status=processing` is what is
    still to index: a client syncing a folder polls that one listing until its `count` is 0."""
    statuses = status or list(get_args(JobStatus))
    found = uploads.list_jobs(
        deps, tenant_id=principal.tenant_id, statuses=statuses, limit=size, offset=offset
    )
    return Page[JobOut].of(found.records, found.total)


@router.get("/jobs/{job_id}", response_model=JobOut, responses=error_responses(404, 422))
def get_job(job_id: str, principal: Principal, deps: Uploads) -> JobOut:
    """An ingestion job's state and progress."""
    return JobOut.model_validate(
        uploads.get_job(deps, tenant_id=principal.tenant_id, job_id=job_id)
    )


@router.get("/documents", response_model=Page[DocumentOut], responses=error_responses(422))
def list_documents(
    principal: Principal, deps: Documents, size: PageSize, offset: PageOffset = 0
) -> Page[DocumentOut]:
    """The tenant's documents, newest first."""
    found = documents.list_documents(deps, tenant_id=principal.tenant_id, limit=size, offset=offset)
    return Page[DocumentOut].of(found.records, found.total)


@router.get(
    "/documents/{document_id}", response_model=DocumentOut, responses=error_responses(404, 422)
)
def get_document(document_id: str, principal: Principal, deps: Documents) -> DocumentOut:
    """One document of the tenant."""
    found = documents.get_document(deps, tenant_id=principal.tenant_id, document_id=document_id)
    return DocumentOut.model_validate(found)


@router.delete(
    "/documents/{document_id}", status_code=204, responses=error_responses(403, 404, 422, 503)
)
def delete_document(
    document_id: str, caller: Authorized, deps: Documents, ip: ClientIp
) -> Response:
    """Delete a document; no search or answer can reach it afterwards. A member may delete only
    documents they uploaded (403); an admin any."""
    uploader = _uploader(caller, ip)
    documents.delete_document(
        deps, tenant_id=caller.tenant_id, document_id=document_id, uploader=uploader
    )
    return Response(status_code=204)


def _uploader(caller: Identity, ip: str) -> documents.Uploader:
    return documents.Uploader(caller.actor(ip), may_change_any=caller.role == "admin")
