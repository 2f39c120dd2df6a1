"""Uploading files (one request each, several at once) and waiting for their jobs."""

from __future__ import annotations

import contextlib
import hashlib
import json
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from rag_client.errors import ApiError
from rag_client.http import Api

FINISHED = ("done", "failed")
UNFINISHED = ("queued", "processing")
# The service's default cap on a page (RAG_MAX_PAGE_SIZE): asking for more would be a 422
# that the service logs as a refused request on every listing.
PAGE_SIZE = 100
POLL_S = 1.0  # between two looks at the jobs when the service does not hold the request
LONG_POLL_S = 20  # `GET /jobs/{id}?wait=` where the service supports it (else ignored)
# After Ctrl-C, how long uploads already sending may finish before the command stops anyway.
INTERRUPT_GRACE_S = 1.5

# (bytes just sent) for one file's progress
Sent = Callable[[int], None]


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _Counted:
    """A file that reports what is read from it (httpx reads it while sending)."""

    def __init__(self, handle: BinaryIO, sent: Sent) -> None:
        self._handle = handle
        self._sent = sent

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        self._sent(len(data))
        return data

    def fileno(self) -> int:  # lets httpx learn the length (a Content-Length, not chunks)
        return self._handle.fileno()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._handle.seek(offset, whence)

    def tell(self) -> int:
        return self._handle.tell()


@dataclass(frozen=True)
class UploadRequest:
    """One file to upload and what to say about it."""

    path: Path
    source_path: str | None = None  # the document name as a relative path (a sync)
    sync_root: str | None = None
    sha256: str | None = None
    collection: str | None = None
    metadata: dict[str, str] | None = None


@dataclass
class UploadResult:
    """What became of one file: a job queued, unchanged, or failed with a reason."""

    path: Path
    status: str  # queued, unchanged, failed (then, after waiting: done or failed)
    source: str | None = None
    document_id: str | None = None
    job_id: str | None = None
    error_code: str | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The result as a JSON object for --json."""
        found = {
            "path": str(self.path),
            "status": self.status,
            "source": self.source,
            "document_id": self.document_id,
            "job_id": self.job_id,
        }
        if self.status == "failed":
            found.update(error_code=self.error_code, error=self.error)
        return found


def upload(api: Api, request: UploadRequest, sent: Sent = lambda n: None) -> UploadResult:
    """Upload one file; a refusal of this file (415, 413, 403, 422...) is a failed result,
    not an exception. Authentication errors and an unreachable service raise."""
    data: dict[str, str] = {}
    if request.source_path is not None:
        data["source_path"] = request.source_path
    if request.sync_root is not None:
        data["sync_root"] = request.sync_root
    if request.sha256 is not None:
        data["sha256"] = request.sha256
    if request.collection is not None:
        data["collection"] = request.collection
    if request.metadata:
        data["metadata"] = json.dumps(request.metadata, ensure_ascii=False)
    handles: list[BinaryIO] = []

    def body() -> dict[str, Any]:
        for old in handles:  # a retry reads the file again from its start
            old.close()
        handles.clear()
        handle = request.path.open("rb")
        handles.append(handle)
        counted = _Counted(handle, sent)
        return {"data": data, "files": {"file": (request.path.name, counted)}}

    try:
        answer = api.request("POST", "/documents", body=body).json()
    except ApiError as exc:
        if exc.status == 401:
            raise
        return UploadResult(request.path, "failed", error_code=exc.code, error=exc.message)
    except OSError as exc:
        return UploadResult(request.path, "failed", error_code="unreadable", error=str(exc))
    finally:
        for handle in handles:
            handle.close()
    return UploadResult(
        request.path,
        "unchanged" if answer.get("status") == "unchanged" else "queued",
        source=answer.get("source"),
        document_id=answer.get("document_id"),
        job_id=answer.get("job_id"),
    )


def upload_all(
    api: Api,
    requests: list[UploadRequest],
    concurrency: int,
    started: Callable[[UploadRequest], Sent],
    finished: Callable[[UploadRequest, UploadResult], None],
) -> list[UploadResult]:
    """Upload files, `concurrency` at a time; results in the order of `requests`.
    `started(request)` gives the progress callback of a file as its upload starts.

    Interrupted (Ctrl-C), no upload starts any more, those in flight get INTERRUPT_GRACE_S to
    finish and are then abandoned: the uploads run on daemon threads, so the process never
    waits for a slow server at exit (a thread pool's workers are joined at exit). An upload
    cut off mid-body is discarded by the service; a rerun sends it again."""
    results: list[UploadResult | None] = [None] * len(requests)
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for index in range(len(requests)):
        todo.put(index)
    stop = threading.Event()
    errors: list[BaseException] = []
    count = min(max(concurrency, 1), len(requests))
    running = [count]  # workers not yet returned
    lock = threading.Lock()
    all_done = threading.Event()

    def work() -> None:
        try:
            while not stop.is_set():
                try:
                    index = todo.get_nowait()
                except queue.Empty:
                    return
                result = upload(api, requests[index], started(requests[index]))
                finished(requests[index], result)
                results[index] = result
        except BaseException as exc:  # a key refused, the service gone: stop them all
            errors.append(exc)
            stop.set()
        finally:
            with lock:
                running[0] -= 1
                if running[0] == 0:
                    all_done.set()

    if not requests:
        return []
    try:
        for n in range(count):
            threading.Thread(target=work, name=f"rag-upload-{n}", daemon=True).start()
        # An Event, not Thread.join: a join interrupted by Ctrl-C may mark a thread that is
        # still sending as stopped (CPython 3.11), and the grace below would be skipped.
        all_done.wait()
    except BaseException:
        stop.set()
        _wait_quietly(all_done, INTERRUPT_GRACE_S)
        raise
    if errors:
        raise errors[0]
    return [result for result in results if result is not None]


def _wait_quietly(event: threading.Event, seconds: float) -> None:
    """Wait at most `seconds` for the event (a second Ctrl-C: stop waiting at once)."""
    with contextlib.suppress(KeyboardInterrupt):
        event.wait(seconds)


def wait_for_jobs(
    api: Api, job_ids: Iterable[str], on_end: Callable[[dict[str, Any]], None] = lambda job: None
) -> dict[str, dict[str, Any]]:
    """Wait until every job has ended; each job's last state by id.

    The newest job still pending is watched with a long poll (`?wait=`, where the service holds
    the request): the service takes jobs oldest first, so it is usually the last to end, and the
    wait is over the moment it ends, not at the next look. While others are pending the poll is
    short, and the listing of jobs still queued or processing says which of them ended; their
    ends are read from the listing of ended jobs (newest first), not job by job. A service that
    answers at once is looked at every `POLL_S`.
    """
    order = list(dict.fromkeys(job_ids))  # in the order they were queued
    pending = set(order)
    ended: dict[str, dict[str, Any]] = {}
    while pending:
        before = time.monotonic()
        newest = next(job_id for job_id in reversed(order) if job_id in pending)
        hold = LONG_POLL_S if len(pending) == 1 else POLL_S
        watched = api.get(f"/jobs/{newest}", params={"wait": hold})
        still = set() if watched["status"] in FINISHED else {newest}
        if len(pending) > 1:
            still |= _unfinished(api) & pending
        gone = [job_id for job_id in order if job_id in pending and job_id not in still]
        for job in _ended_jobs(api, gone, {newest: watched}):
            ended[job["job_id"]] = job
            on_end(job)
        pending = still
        if pending and not gone and time.monotonic() - before < POLL_S:
            time.sleep(POLL_S)  # the service answered at once: look again politely
    return ended


def _ended_jobs(
    api: Api, job_ids: list[str], known: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The last states of ended jobs, in the order of `job_ids`: those `known`, then the
    listing of ended jobs, newest first, a page at a time until all are found (a job ended
    meanwhile only pushes the others to later pages: none is missed); any job it does not
    hold is asked for by its id."""
    found = {job_id: job for job_id, job in known.items() if job_id in job_ids}
    wanted = set(job_ids) - set(found)
    offset = 0
    while wanted:
        page = api.get(
            "/jobs", params={"status": list(FINISHED), "limit": PAGE_SIZE, "offset": offset}
        )
        for job in page["data"]:
            if job["job_id"] in wanted:
                found[job["job_id"]] = job
                wanted.discard(job["job_id"])
        offset += len(page["data"])
        if not page["data"] or offset >= page["count"]:
            break
    for job_id in sorted(wanted):
        found[job_id] = api.get(f"/jobs/{job_id}")
    return [found[job_id] for job_id in job_ids]


def _unfinished(api: Api) -> set[str]:
    """Ids of the tenant's jobs still queued or processing (every page)."""
    return {job["job_id"] for job in list_all(api, "/jobs", {"status": list(UNFINISHED)})}


def settle(results: list[UploadResult], jobs: dict[str, dict[str, Any]]) -> None:
    """Give each queued result the end of its job: done, or failed with the job's reason."""
    for result in results:
        job = jobs.get(result.job_id or "")
        if job is None:
            continue
        result.status = job["status"]
        if job["status"] == "failed":
            result.error_code = job.get("error_code")
            result.error = job.get("error")


def list_all(api: Api, path: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Every item of a paged listing (`data`, `count`, `limit`/`offset`), in pages of
    `PAGE_SIZE`, or of the service's own size where its cap is lower."""
    items: list[dict[str, Any]] = []
    size: int | None = PAGE_SIZE
    while True:
        paging = {"offset": len(items)} if size is None else {"limit": size, "offset": len(items)}
        try:
            page = api.get(path, params={**params, **paging})
        except ApiError as exc:
            if exc.status != 422 or size is None:
                raise
            # A lower cap ("limit must not exceed 100"): that, else the default page size.
            cap = re.search(r"exceed (\d+)", exc.message)
            size = int(cap.group(1)) if cap and int(cap.group(1)) < size else None
            continue
        items += page["data"]
        if not page["data"] or len(items) >= page["count"]:
            return items
