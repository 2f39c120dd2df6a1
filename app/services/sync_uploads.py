"""What a folder sync adds to an upload: the file's path under the sync folder as its document
name, the folder's label, and the content hash the client already knows.

A document is identified by its name (the path relative to the sync folder) within its
collection; its content SHA-256 decides whether it changed. An upload whose content is what the
document already has indexed is answered "unchanged" and nothing is queued.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from app.domain import GENERAL_COLLECTION, ListedPage
from app.errors import InvalidInput
from app.jobs.store import JobRecord
from app.services.documents import Uploader
from app.services.indexing import DocumentDeps, file_sha256
from app.services.uploads import (
    ReceivedFile,
    UploadDeps,
    discard_uploads,
    submit_uploads,
)
from app.storage.documents import DocumentFilter, DocumentRecord
from app.text.arabic import BIDI_CONTROLS

# The form fields of an upload that a sync sends beside its one file.
SYNC_FIELDS = ("source_path", "sync_root", "sha256")
MAX_SOURCE_PATH_CHARS = 255  # the documents.source column
MAX_SYNC_ROOT_CHARS = 100
_UNSAFE_PATH_CHARS = re.compile(rf"[\x00-\x1f\x7f{BIDI_CONTROLS}\\:*?\"<>|]")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def source_of_path(raw: str) -> str:
    """A document name from a relative path with `/` separators: NFC, unsafe characters
    replaced by `_` (the client applies the same rule to compare names). InvalidInput for an
    absolute path, `.` or `..` segments, or a name that is too long."""
    path = _UNSAFE_PATH_CHARS.sub("_", unicodedata.normalize("NFC", raw))
    segments = path.split("/")
    if not raw or any(s in ("", ".", "..") for s in segments):
        raise InvalidInput(
            "source_path must be a relative path like 'dir/file.pdf' (no empty, '.' or '..' parts)"
        )
    if len(path) > MAX_SOURCE_PATH_CHARS:
        raise InvalidInput(f"source_path is longer than {MAX_SOURCE_PATH_CHARS} characters")
    return path


def _check_same_type(source_path: str, filename: str) -> None:
    """InvalidInput when the document name ends in another type than the file sent: the file
    is read by its own suffix, while its page pictures and `content_type` follow the name."""
    named = PurePosixPath(source_path).suffix.lower()
    sent = PurePosixPath(filename.replace("\\", "/")).suffix.lower()
    if named != sent:
        raise InvalidInput(
            f"source_path {source_path!r} ends in {named or 'no type'!r} but the file sent is "
            f"{sent or 'of no type'!r}: a document's name keeps its file's type"
        )


@dataclass(frozen=True)
class SyncFields:
    """The sync fields of one upload request (each optional)."""

    source_path: str | None = None
    sync_root: str | None = None
    sha256: str | None = None

    @classmethod
    def parse(cls, texts: dict[str, str], files: int) -> SyncFields:
        """The fields from the request's text fields (others, such as the collection, are not
        theirs); InvalidInput when malformed or given with more than one file (they describe
        one file)."""
        if not any(name in texts for name in SYNC_FIELDS):
            return cls()
        if files != 1:
            raise InvalidInput("source_path, sync_root and sha256 describe one file: send one")
        sha = texts.get("sha256")
        if sha is not None and not _SHA256.fullmatch(sha):
            raise InvalidInput("sha256 must be 64 lower-case hex digits")
        root = texts.get("sync_root")
        if root is not None and not 0 < len(root) <= MAX_SYNC_ROOT_CHARS:
            raise InvalidInput(f"sync_root must have 1 to {MAX_SYNC_ROOT_CHARS} characters")
        path = texts.get("source_path")
        return cls(None if path is None else source_of_path(path), root, sha)


@dataclass(frozen=True)
class Unchanged:
    """An upload whose content the document already has indexed: nothing was queued."""

    document_id: str
    source: str


def submit_sync_upload(
    deps: UploadDeps,
    *,
    tenant_id: str,
    reservations: list[str] | None,
    files: list[ReceivedFile],
    uploader: Uploader,
    fields: SyncFields,
    placement: Mapping[str, str] | None = None,
    found: Mapping[str, DocumentRecord | None] | None = None,
) -> list[JobRecord] | Unchanged:
    """Queue the request's files as `submit_uploads` does, named and labelled by `fields`;
    Unchanged (the reservation released, the file removed) when the request gave `sha256` and
    the one file's content is what its document already has indexed. `found`: the documents the
    caller has just looked up by the files' names in the collection (None: not looked up)."""
    found = found or {}
    known = {source: record.document_id for source, record in found.items() if record}
    if fields != SyncFields():
        (file,) = files
        try:
            if fields.source_path is not None:
                _check_same_type(fields.source_path, file.client_filename)
            file.sha256 = file_sha256(file.path)
            if fields.sha256 is not None and fields.sha256 != file.sha256:
                raise InvalidInput(
                    f"the file's sha256 is {file.sha256}, not the {fields.sha256} sent: it "
                    "changed or was damaged on the way"
                )
        except BaseException:
            discard_uploads(deps, tenant_id=tenant_id, reservations=reservations, files=[file])
            raise
        if fields.source_path is not None:
            file.source = fields.source_path
        source = file.document_name
        collection_id = (placement or {}).get("collection_id", GENERAL_COLLECTION)
        if source in found:
            existing = found[source]
        else:
            existing = deps.documents.find(tenant_id, collection_id, source)
        if (
            fields.sha256 is not None
            and existing is not None
            and existing.status == "done"
            and existing.content_sha256 == file.sha256
        ):
            discard_uploads(deps, tenant_id=tenant_id, reservations=reservations, files=[file])
            if existing.sync_root != fields.sync_root and fields.sync_root is not None:
                uploader.check_may_change(existing, "relabel")
                deps.documents.set_sync_root(tenant_id, existing.document_id, fields.sync_root)
            return Unchanged(existing.document_id, existing.source)
        if existing is not None:
            known[source] = existing.document_id
        if fields.sync_root is not None:
            # Labelled in the transaction that queues its job, as the collection is.
            placement = {**(placement or {}), "sync_root": fields.sync_root}
    return submit_uploads(
        deps,
        tenant_id=tenant_id,
        reservations=reservations,
        files=files,
        uploader=uploader,
        placement=placement,
        known=known,
    )


def list_matching(
    deps: DocumentDeps,
    *,
    tenant_id: str,
    wanted: DocumentFilter,
    limit: int,
    offset: int,
    collections: Collection[str] | None = None,
) -> ListedPage[DocumentRecord]:
    """One page of the tenant's documents that `wanted` keeps (by name; of these collections
    only, when given), and how many in all."""
    if wanted.source_prefix:
        # Names are stored NFC (`source_of_path`, `sanitise_filename`): so is the prefix, or a
        # decomposed "café" would never match.
        wanted = replace(wanted, source_prefix=unicodedata.normalize("NFC", wanted.source_prefix))
    return deps.documents.page_matching(tenant_id, wanted, limit, offset, collections)
