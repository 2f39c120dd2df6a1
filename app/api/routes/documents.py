"""Uploads, jobs and documents of the caller's tenant."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal, get_args

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from app.api.access import Authorized
from app.api.deps import ClientIp, ContainerDep, PageLimit, PageOffset, Principal
from app.api.errors import error_responses
from app.api.schemas import (
    DocumentList,
    DocumentOut,
    JobAccepted,
    JobList,
    JobOut,
    JobStatus,
    Progress,
    UploadAccepted,
)
from app.api.upload import receive_uploads
from app.errors import public_job_error
from app.ingestion import SUPPORTED_EXTENSIONS
from app.jobs.store import JobRecord
from app.services import documents, uploads
from app.services.auth import Identity
from app.storage.documents import DocumentRecord

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


def _document_out(record: DocumentRecord) -> DocumentOut:
    return DocumentOut(
        document_id=record.document_id,
        source=record.source,
        status=record.status,
        pages=record.pages,
        chunks=record.chunks,
        size_bytes=record.size_bytes,
        uploaded_at=record.uploaded_at.isoformat(),
        uploaded_by=record.uploaded_by,
        uploaded_by_name=record.uploaded_by_name,
    )


def _shown_status(job: JobRecord) -> Literal["queued", "processing", "done", "failed"]:
    # A reservation is an upload still being received: never handed to a client as a job.
    status = job.status
    assert status != "reserved", "a reservation is not a job yet"
    return status


def _job_out(job: JobRecord) -> JobOut:
    code, error = job.error_code, None
    if code is not None:  # the stored detail is for operators; clients get a safe text
        error = public_job_error(code, job.error or "")
    return JobOut(
        job_id=job.job_id,
        document_id=job.document_id,
        status=_shown_status(job),
        source=job.source,
        progress=Progress(
            done=job.progress_done, total=job.progress_total, stage=job.progress_stage
        ),
        chunks_indexed=job.chunks_indexed,
        pages=job.pages,
        error_code=code,
        error=error,
        warnings=list(job.warnings),
        created_at=job.created_at.isoformat(),
        updated_at=job.updated_at.isoformat(),
    )


@router.post(
    "/documents",
    status_code=202,
    response_model=UploadAccepted,
    openapi_extra=_UPLOAD_BODY,
    responses=error_responses(403, 413, 415, 422, 429),
)
async def upload_document(
    request: Request, container: ContainerDep, caller: Authorized, ip: ClientIp
) -> UploadAccepted:
    """Accept files (multipart field `file`, repeated for several; one job each) and queue them
    for background indexing. All files of a request are accepted, or none. A member may replace
    only documents they uploaded (403)."""
    tenant = caller.tenant_id
    deps = container.upload_deps
    uploader = _uploader(caller, ip)
    # The first job slot is taken before the body is read, each further one before its file is
    # written: a tenant over its queue quota gets 429 and nothing reaches the disk.
    reservations = [await run_in_threadpool(uploads.reserve_upload, deps, tenant, uploader)]

    def reserve_next() -> None:  # runs in the receiver's worker thread
        reservations.append(uploads.reserve_upload(deps, tenant, uploader))

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
        uploads.submit_uploads, deps, tenant, reservations, received, uploader
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
        uploads.release_upload(deps, tenant, reservation)


@router.get("/jobs", response_model=JobList, responses=error_responses(422))
def list_jobs(
    container: ContainerDep,
    principal: Principal,
    status: Annotated[
        list[JobStatus] | None,
        Query(description="keep jobs in these statuses (repeat it); default: every status"),
    ] = None,
    limit: PageLimit = None,
    offset: PageOffset = 0,
) -> JobList:
    """The tenant's ingestion jobs, newest first. `?status=queued&status=processing` is what is
    still to index: a client syncing a folder polls that one listing until its `count` is 0."""
    size = container.request_limits.page_size(limit)
    statuses = status or list(get_args(JobStatus))
    found = uploads.list_jobs(container.upload_deps, principal.tenant_id, statuses, size, offset)
    return JobList(data=[_job_out(job) for job in found.records], count=found.total)


@router.get("/jobs/{job_id}", response_model=JobOut, responses=error_responses(404, 422))
def get_job(job_id: str, container: ContainerDep, principal: Principal) -> JobOut:
    """An ingestion job's state and progress."""
    return _job_out(uploads.get_job(container.upload_deps, principal.tenant_id, job_id))


@router.get("/documents", response_model=DocumentList, responses=error_responses(422))
def list_documents(
    container: ContainerDep,
    principal: Principal,
    limit: PageLimit = None,
    offset: PageOffset = 0,
) -> DocumentList:
    """The tenant's documents, newest first."""
    size = container.request_limits.page_size(limit)
    found = documents.list_documents(container.document_deps, principal.tenant_id, size, offset)
    return DocumentList(data=[_document_out(r) for r in found.records], count=found.total)


@router.get(
    "/documents/{document_id}", response_model=DocumentOut, responses=error_responses(404, 422)
)
def get_document(document_id: str, container: ContainerDep, principal: Principal) -> DocumentOut:
    """One document of the tenant."""
    found = documents.get_document(container.document_deps, principal.tenant_id, document_id)
    return _document_out(found)


@router.delete(
    "/documents/{document_id}", status_code=204, responses=error_responses(403, 404, 422, 503)
)
def delete_document(
    document_id: str, container: ContainerDep, caller: Authorized, ip: ClientIp
) -> Response:
    """Delete a document; no search or answer can reach it afterwards. A member may delete only
    documents they uploaded (403); an admin any."""
    uploader = _uploader(caller, ip)
    documents.delete_document(container.document_deps, caller.tenant_id, document_id, uploader)
    return Response(status_code=204)


def _uploader(caller: Identity, ip: str) -> documents.Uploader:
    return documents.Uploader(caller.actor(ip), may_change_any=caller.role == "admin")
