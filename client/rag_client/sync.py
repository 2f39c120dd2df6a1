"""`rag sync`: make the documents of one folder label match the folder.

A document is named by its path relative to the folder (within its collection) and carries the
folder's label (`sync_root`); its content SHA-256 decides whether it changed. The state is the
service's listing, so two machines syncing the same folder agree and a rerun after an
interruption uploads only what is still missing or different.
"""

from __future__ import annotations

import fnmatch
import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_client.errors import ApiError
from rag_client.http import Api
from rag_client.transfer import UploadRequest, UploadResult, file_sha256, list_all

# The service names a document after its path this way (app/services/sync_uploads.py).
_UNSAFE_PATH_CHARS = re.compile(r"[\x00-\x1f\x7f\u202a-\u202e\u2066-\u2069\\:*?\"<>|]")
LISTED_FIELDS = ("document_id", "source", "content_sha256", "status", "sync_root")
# Where an upload without a collection goes on the service (so where a sync without one looks).
DEFAULT_COLLECTION = "general"


def document_name(relative: str) -> str:
    """The name the service gives the file at this relative path (`a/b.pdf`)."""
    return _UNSAFE_PATH_CHARS.sub("_", unicodedata.normalize("NFC", relative))


def default_label(root: Path) -> str:
    """The folder's label when none is given: its own name."""
    return root.resolve().name or "root"


@dataclass(frozen=True)
class LocalFile:
    """A file under the sync folder, by its document name."""

    path: Path
    name: str
    sha256: str


@dataclass(frozen=True)
class Filters:
    """Which relative paths take part: hidden files and folders never; then `include` (any
    of them; none: all) and not `exclude`."""

    include: Sequence[str] = ()
    exclude: Sequence[str] = ()

    def keeps(self, name: str) -> bool:
        """Whether the file of this document name takes part in the sync."""
        if any(part.startswith(".") for part in name.split("/")):
            return False
        base = name.rsplit("/", 1)[-1]

        def matches(pattern: str) -> bool:
            return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(base, pattern)

        if self.include and not any(matches(p) for p in self.include):
            return False
        return not any(matches(p) for p in self.exclude)


def scan(root: Path, filters: Filters) -> list[LocalFile]:
    """The folder's files that take part, by name, each hashed."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for filename in sorted(files):
            path = Path(folder) / filename
            name = document_name(path.relative_to(root).as_posix())
            if path.is_file() and filters.keeps(name):
                found.append(LocalFile(path, name, file_sha256(path)))
    return found


@dataclass
class Plan:
    """What a sync will do: upload new files, replace changed ones, delete the gone ones."""

    upload: list[LocalFile] = field(default_factory=list)
    replace: list[LocalFile] = field(default_factory=list)
    unchanged: list[LocalFile] = field(default_factory=list)
    delete: list[dict[str, Any]] = field(default_factory=list)  # listed documents


def remote_documents(api: Api, collection: str) -> dict[str, dict[str, Any]]:
    """The collection's documents by name, whatever folder (or plain upload) they came from:
    one cheap listing. A file is compared with the document of its name even when another
    label has it, since its upload replaces (or, unchanged, adopts) that document; only
    deletions are limited to this folder's label."""
    params = {"collection": collection, "fields": list(LISTED_FIELDS)}
    return {doc["source"]: doc for doc in list_all(api, "/documents", params)}


def make_plan(
    local: list[LocalFile],
    remote: dict[str, dict[str, Any]],
    filters: Filters,
    delete: bool,
    label: str,
) -> Plan:
    """Compare the folder with the listing: same hash is unchanged (a failed document is
    sent again), another hash is replaced, a missing one uploaded; with `delete`, the listed
    documents of this folder label whose file is gone (and that the filters keep) are
    deleted."""
    plan = Plan()
    for file in local:
        doc = remote.get(file.name)
        if doc is None:
            plan.upload.append(file)
        elif doc.get("content_sha256") == file.sha256 and doc.get("status") != "failed":
            plan.unchanged.append(file)
        else:
            plan.replace.append(file)
    if delete:
        present = {file.name for file in local}
        plan.delete = [
            doc
            for name, doc in sorted(remote.items())
            if doc.get("sync_root") == label and name not in present and filters.keeps(name)
        ]
    return plan


def upload_requests(plan: Plan, label: str, collection: str | None) -> list[UploadRequest]:
    """The uploads of a plan: new files first, then changed ones."""
    return [
        UploadRequest(
            file.path,
            source_path=file.name,
            sync_root=label,
            sha256=file.sha256,
            collection=collection,
        )
        for file in plan.upload + plan.replace
    ]


def delete_document(api: Api, doc: dict[str, Any]) -> str | None:
    """Delete a listed document; None when done (or already gone), else the reason."""
    try:
        api.request("DELETE", f"/documents/{doc['document_id']}")
    except ApiError as exc:
        if exc.status == 404:
            return None
        if exc.status == 401:
            raise
        return f"{exc.code}: {exc.message}"
    return None


@dataclass
class Summary:
    """What a sync did (or, dry, would do): the JSON document of `rag sync --json`."""

    dry_run: bool
    sync_root: str
    collection: str
    uploaded: list[dict[str, Any]] = field(default_factory=list)
    replaced: list[dict[str, Any]] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)  # types the service refuses
    failed: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The summary as one JSON object."""
        return {
            "dry_run": self.dry_run,
            "sync_root": self.sync_root,
            "collection": self.collection,
            "uploaded": self.uploaded,
            "replaced": self.replaced,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "skipped": self.skipped,
            "failed": self.failed,
        }


def record_upload(summary: Summary, replacing: bool, result: UploadResult, name: str) -> None:
    """File one upload's result under uploaded, replaced, unchanged, skipped or failed."""
    entry = {"source": name, "document_id": result.document_id, "job_id": result.job_id}
    if result.status == "unchanged":
        summary.unchanged.append(name)
    elif result.status == "failed" and result.error_code == "unsupported_file_type":
        summary.skipped.append({"source": name, "reason": result.error})
    elif result.status == "failed":
        summary.failed.append(
            {"source": name, "error_code": result.error_code, "error": result.error}
        )
    else:
        (summary.replaced if replacing else summary.uploaded).append(
            {**entry, "status": result.status}
        )
