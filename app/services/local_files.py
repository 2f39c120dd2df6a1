"""Local files handed to the service from the command line: indexed at once, or queued for the
workers as an upload would be."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from app.errors import UnsupportedFileType
from app.ingestion import SUPPORTED_EXTENSIONS
from app.jobs.store import JobRecord
from app.services.blocks.pipeline import IngestedDocument, ProgressCallback
from app.services.indexing import DocumentDeps, index_document
from app.services.uploads import (
    ReceivedFile,
    UploadDeps,
    release_upload,
    reserve_upload,
    sanitise_filename,
    submit_uploads,
)
from app.services.users import validate_tenant_id


def queue_local_file(deps: UploadDeps, *, tenant_id: str, path: Path) -> JobRecord:
    """Hand a local file to the service's workers as an upload would be (CLI `ingest --queue`):
    a copy under the uploads folder becomes a queued job, sent with the one `enqueue`."""
    validate_tenant_id(tenant_id)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_EXTENSIONS:
        allowed = ", ".join(sorted(SUPPORTED_EXTENSIONS))
        raise UnsupportedFileType(
            f"files of type {suffix or '(none)'!r} are not supported; use one of {allowed}"
        )
    reservation = reserve_upload(deps, tenant_id=tenant_id)
    stored = deps.uploads_dir / f"{secrets.token_hex(16)}{suffix}"
    try:
        stored.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, stored)
    except BaseException:
        stored.unlink(missing_ok=True)
        release_upload(deps, tenant_id=tenant_id, reservation=reservation)
        raise
    received = ReceivedFile(stored, path.name, stored.stat().st_size)
    (job,) = submit_uploads(deps, tenant_id=tenant_id, reservations=[reservation], files=[received])
    return job


def ingest_local_file(
    deps: DocumentDeps,
    *,
    tenant_id: str,
    path: Path,
    progress: ProgressCallback | None = None,
) -> IngestedDocument:
    """Index a local file synchronously (the CLI path); its file name is the document source."""
    validate_tenant_id(tenant_id)
    source = sanitise_filename(path.name)
    return index_document(deps, tenant_id=tenant_id, path=path, source=source, progress=progress)
