"""How `rag` waits for many jobs: it learns of the last end the moment it happens (the newest
job's long poll), and reads the ends from the listing of ended jobs, not job by job.

A service of jobs that end on a schedule stands in for the server here, for speed and to count
the requests; the real server's side is `tests/client/test_rag_sync.py` (`--wait`)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from rag_client import transfer


class _ScheduledJobs:
    """Jobs that end at given moments; `GET /jobs/{id}?wait=` is held until its job ends."""

    def __init__(self, ends_after_s: list[float], failed: set[int] = frozenset()) -> None:
        start = time.monotonic()
        self.ids = [f"job-{n}" for n in range(len(ends_after_s))]
        self._ends = {job_id: start + s for job_id, s in zip(self.ids, ends_after_s, strict=True)}
        self._failed = {self.ids[n] for n in failed}
        self.requests: list[str] = []

    def _state(self, job_id: str) -> dict[str, Any]:
        if time.monotonic() < self._ends[job_id]:
            return {"job_id": job_id, "status": "processing", "source": job_id}
        if job_id in self._failed:
            return {
                "job_id": job_id,
                "status": "failed",
                "source": job_id,
                "error_code": "unsupported_type",
                "error": "no text could be read",
            }
        return {"job_id": job_id, "status": "done", "source": job_id}

    def get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = params or {}
        self.requests.append(path)
        if path != "/jobs":
            job_id = path.rsplit("/", 1)[1]
            held = min(float(params.get("wait", 0)), self._ends[job_id] - time.monotonic())
            if held > 0:
                threading.Event().wait(held)
            return self._state(job_id)
        statuses = set(params["status"])
        newest_first = [self._state(job_id) for job_id in reversed(self.ids)]
        chosen = [job for job in newest_first if job["status"] in statuses]
        offset, limit = int(params.get("offset", 0)), int(params.get("limit", 100))
        return {"data": chosen[offset : offset + limit], "count": len(chosen)}


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The client's polite pauses, recorded (and kept short)."""
    paused: list[float] = []

    def pause(seconds: float) -> None:
        paused.append(seconds)
        threading.Event().wait(0.02)

    monkeypatch.setattr(transfer.time, "sleep", pause)
    return paused


def test_many_jobs_end_is_seen_at_once_and_read_from_the_listing(sleeps: list[float]) -> None:
    # 150 jobs ending oldest first within 0.4 s: more than one page of the listing of ends.
    service = _ScheduledJobs([0.1 + n * 0.002 for n in range(150)], failed={7})
    reported: list[str] = []
    started = time.monotonic()
    ended = transfer.wait_for_jobs(
        service,  # type: ignore[arg-type]
        service.ids,
        lambda job: reported.append(job["job_id"]),
    )
    waited = time.monotonic() - started
    assert sorted(reported) == sorted(service.ids)  # each end told once
    assert {job_id for job_id, job in ended.items() if job["status"] == "done"} == set(
        service.ids
    ) - {"job-7"}
    assert ended["job-7"]["error_code"] == "unsupported_type"  # the reason, from the listing
    # The last end was seen as it happened, not at a next look a second later: no pause.
    assert sleeps == []
    assert waited < transfer.POLL_S
    # One held request for the newest job, then listings: never one request per job.
    by_id = [path for path in service.requests if path != "/jobs"]
    assert by_id == ["/jobs/job-149"]
    assert len(service.requests) <= 4


def test_ends_are_told_as_they_come_while_the_newest_job_runs(sleeps: list[float]) -> None:
    # The first jobs end long before the last: they are reported within about a poll each.
    service = _ScheduledJobs([0.05, 0.1, 2.5])
    told: dict[str, float] = {}
    started = time.monotonic()
    transfer.wait_for_jobs(
        service,  # type: ignore[arg-type]
        service.ids,
        lambda job: told.setdefault(job["job_id"], time.monotonic() - started),
    )
    assert list(told) == ["job-0", "job-1", "job-2"]
    assert told["job-1"] < transfer.POLL_S + 0.5
    assert told["job-2"] >= 2.5
    assert sleeps == []  # every look was held by the service, none answered at once


def test_a_service_that_answers_at_once_is_looked_at_politely(
    sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    service = _ScheduledJobs([0.15, 0.3])
    unheld = service.get

    def at_once(path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return unheld(path, {k: v for k, v in (params or {}).items() if k != "wait"})

    monkeypatch.setattr(service, "get", at_once)
    ended = transfer.wait_for_jobs(service, service.ids)  # type: ignore[arg-type]
    assert {job["status"] for job in ended.values()} == {"done"}
    assert sleeps and set(sleeps) == {transfer.POLL_S}  # paused between looks, not spinning
