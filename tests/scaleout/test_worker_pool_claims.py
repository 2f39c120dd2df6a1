"""The in-process pool (threads backend) claims a lone upload at once: the job is handed to its
runner as soon as the upload wakes a thread, not after a batch-gathering window (a
script that uploads a file and waits for it got twice as slow when lone jobs waited for a batch).

The job table is a fake that records claims; the assertion is on events, not on timings.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from app.config import load_settings
from app.jobs.store import JobRecord
from app.jobs.threads import IngestWorkerPool

pytestmark = pytest.mark.unit


def queued_job(job_id: str) -> JobRecord:
    now = datetime.now(UTC)
    return JobRecord(
        job_id=job_id,
        tenant_id="acme",
        document_id="d",
        source="note.txt",
        stored_path="/nonexistent",
        size_bytes=1024,
        status="queued",
        progress_done=0,
        progress_total=0,
        progress_stage="queued",
        chunks_indexed=0,
        pages=0,
        error_code=None,
        error=None,
        attempts=0,
        created_at=now,
        updated_at=now,
    )


class RecordingJobs:
    """A job table holding queued jobs in memory; tells when a claim found nothing."""

    def __init__(self) -> None:
        self.queued: list[JobRecord] = []
        self.empty_claim = threading.Event()
        self._lock = threading.Lock()

    def requeue_stale(self) -> int:
        return 0

    def has_claimable(self, scope: str = "all") -> bool:
        with self._lock:
            if not self.queued:
                self.empty_claim.set()
            return bool(self.queued)

    def claim_batch(self, *args: Any, max_jobs: int, **kwargs: Any) -> list[JobRecord]:
        with self._lock:
            batch, self.queued = self.queued[:max_jobs], self.queued[max_jobs:]
        if not batch:
            self.empty_claim.set()
        return batch


def test_a_lone_upload_is_claimed_at_once_not_after_a_batch_window() -> None:
    # Before, a thread woken by an upload waited for a quiet RAG_INGEST_BATCH_WAIT_MS
    # (here 10 s, and up to 4 windows) unless a full batch came: a lone job sat out the window.
    settings = load_settings(
        _env_file=None, worker_pool_size=1, ingest_batch_wait_ms=10_000, ingest_batch_jobs=32
    )
    jobs = RecordingJobs()
    ran: list[list[str]] = []
    handed_over = threading.Event()

    def run_batch(batch: list[JobRecord]) -> None:
        ran.append([job.job_id for job in batch])
        handed_over.set()

    # The poll interval is far longer than the test waits: only the upload's wake-up can do it.
    pool = IngestWorkerPool(jobs, run_batch, settings, poll_interval_s=600)  # type: ignore[arg-type]
    pool.start()
    try:
        assert jobs.empty_claim.wait(5), "the idle thread never looked at the queue"
        job = queued_job("lone")
        jobs.queued.append(job)
        pool.enqueue(job)
        assert handed_over.wait(5), "a lone upload waited for a batch instead of starting"
        assert ran == [["lone"]]
    finally:
        pool.stop()
