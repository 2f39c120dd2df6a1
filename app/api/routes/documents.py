"""Uploads, jobs and documents of the caller's tenant."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from app.api.deps import ContainerDep, Principal
from app.api.errors import error_responses
from app.api.schemas import DocumentList, DocumentOut, JobOut, Progress, UploadAccepted
from app.api.upload import receive_upload
from app.errors import InvalidInput, public_job_error
from app.ingestion import SUPPORTED_EXTENSIONS
from app.services import documents as service
from app.storage.documents import DocumentRecord
from app.storage.jobs import JobRecord, split_job_error

router = APIRouter(tags=["documents"])
DEFAULT_PAGE_SIZE = 50

_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {"file": {"type": "string", "format": "binary"}},
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
    )


def _job_out(job: JobRecord) -> JobOut:
    code = error = None
    if job.error is not None:  # the stored detail is for operators; clients get a safe text
        code, detail = split_job_error(job.error)
        error = public_job_error(code, detail)
    return JobOut(
        job_id=job.job_id,
        document_id=job.document_id,
        status=job.status,
        source=job.source,
        progress=Progress(
            done=job.progress_done, total=job.progress_total, stage=job.progress_stage
        ),
        chunks_indexed=job.chunks_indexed,
        pages=job.pages,
        error_code=code,
        error=error,
        created_at=job.created_at.isoformat(),
        updated_at=job.updated_at.isoformat(),
    )


@router.post(
    "/documents",
    status_code=202,
    response_model=UploadAccepted,
    openapi_extra=_UPLOAD_BODY,
    responses=error_responses(413, 415, 422, 429),
)
async def upload_document(
    request: Request, container: ContainerDep, principal: Principal
) -> UploadAccepted:
    """Accept a file (multipart field `file`) and queue it for background indexing."""
    received = await receive_upload(
        request,
        dest_dir=service.uploads_dir(container),
        max_bytes=container.settings.max_upload_bytes,
        accept_suffix=SUPPORTED_EXTENSIONS,
    )
    # Hashing the file and writing the job row block: keep them off the event loop.
    job = await run_in_threadpool(
        service.submit_upload,
        container,
        principal.tenant_id,
        received.path,
        received.client_filename,
        received.size_bytes,
    )
    await run_in_threadpool(request.app.state.workers.enqueue, job)  # may talk to Redis
    return UploadAccepted(
        job_id=job.job_id, document_id=job.document_id, status=job.status, source=job.source
    )


@router.get("/jobs/{job_id}", response_model=JobOut, responses=error_responses(404, 422))
def get_job(job_id: str, container: ContainerDep, principal: Principal) -> JobOut:
    """An ingestion job's state and progress."""
    return _job_out(service.get_job(container, principal.tenant_id, job_id))


@router.get("/documents", response_model=DocumentList, responses=error_responses(422))
def list_documents(
    container: ContainerDep,
    principal: Principal,
    limit: Annotated[
        int | None, Query(ge=1, le=1000, description="page size; default 50 or the cap")
    ] = None,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> DocumentList:
    """The tenant's documents, newest first."""
    cap = container.settings.max_page_size
    if limit is None:  # the default page never exceeds a smaller configured cap
        limit = min(DEFAULT_PAGE_SIZE, cap)
    if limit > cap:
        raise InvalidInput(f"limit must not exceed {cap}")
    records, total = service.list_documents(container, principal.tenant_id, limit, offset)
    return DocumentList(data=[_document_out(r) for r in records], count=total)


@router.get(
    "/documents/{document_id}", response_model=DocumentOut, responses=error_responses(404, 422)
)
def get_document(document_id: str, container: ContainerDep, principal: Principal) -> DocumentOut:
    """One document of the tenant."""
    return _document_out(service.get_document(container, principal.tenant_id, document_id))


@router.delete(
    "/documents/{document_id}", status_code=204, responses=error_responses(404, 422, 503)
)
def delete_document(document_id: str, container: ContainerDep, principal: Principal) -> Response:
    """Delete a document; no search or answer can reach it afterwards."""
    service.delete_document(container, principal.tenant_id, document_id)
    return Response(status_code=204)
