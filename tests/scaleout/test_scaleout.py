"""Scale-out on real engines: two API processes and separate workers over a Chroma server, Redis
and PostgreSQL, exactly as the compose file runs them.

What a user of a multi-process deployment must never notice: which process answered. A document
uploaded through one API process is visible through the other as soon as its job is done (also
to the keyword index, which each process keeps in memory), gone from both as soon as it is
deleted, a worker killed mid-job does not lose or duplicate anything, and restarting an API
process loses nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from testkit.local_stack import ApiClient, LocalStack
from tests.scaleout.running_stack import running_stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

MARKER = "QUARTZ-4471"
NOTE = (
    f"The {MARKER} relief valve must be inspected every 30 days.\n\n"
    f"{MARKER} inspection results are filed with the plant safety officer on level two."
).encode()
QUESTION = f"How often must the {MARKER} relief valve be inspected?"
# One chunk mentioning the marker once, so BM25 ranks it below NOTE while NOTE exists.
ASIDE = (
    f"Pump room log: seals, filters and gauges were checked; one entry mentions {MARKER} but "
    "refers to another site, and the rest cover lubrication and two worn belts."
).encode()


def maintenance_log(records: int) -> bytes:
    """A long text whose every sentence is different (so every chunk gets its own id)."""
    parts = ["pump", "valve", "filter", "gauge", "sensor", "motor", "seal"]
    lines = [
        f"Record {i:05d}: the {parts[i % 7]} in bay {i % 97} was checked by team {i % 13} "
        f"and logged with code R{i * 7919 % 100003:06d}."
        for i in range(records)
    ]
    return "\n".join(lines).encode()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """Chroma server, PostgreSQL database, Redis namespace, two API processes, one worker."""
    root: Path = tmp_path_factory.mktemp("scaleout")
    with running_stack(
        root,
        {
            # Short timings so a dead worker is noticed in seconds, not a minute.
            "RAG_JOB_HEARTBEAT_S": "0.5",
            "RAG_JOB_STALE_AFTER_S": "3",
            # Small chunks: many chunks (several store batches) from a quickly embedded file.
            "RAG_CHUNK_SIZE": "300",
            "RAG_CHUNK_OVERLAP": "50",
            "RAG_QUOTA_QUEUED_JOBS": "8",
        },
    ) as (local, _apis):
        yield local


def api(stack: LocalStack, name: str) -> Any:
    """The running process called `name` (the latest one, after restarts)."""
    return next(p for p in reversed(stack.processes) if p.name == name)


def clients(stack: LocalStack, tenant: str) -> tuple[ApiClient, ApiClient]:
    """A user of `tenant` logged in through API 1; the same token used against API 2."""
    username = f"user-{tenant}"
    stack.create_user(tenant, username)
    first = ApiClient(api(stack, "api1").url)
    token = first.login(username)
    return first, ApiClient(api(stack, "api2").url, token)


def upload(stack: LocalStack, client: ApiClient, name: str, content: bytes) -> dict[str, Any]:
    job = client.upload(name, content)
    stack.job_ids.add(job["job_id"])
    return job


def document_ids(result: dict[str, Any]) -> set[str]:
    return {hit["document_id"] for hit in result["results"]}


def keyword_ranks(result: dict[str, Any]) -> dict[str, int | None]:
    """Each returned document's best rank in the keyword arm (None: not a keyword hit)."""
    ranks: dict[str, int | None] = {}
    for hit in result["results"]:
        rank, best = hit["stages"]["keyword_rank"], ranks.get(hit["document_id"])
        ranks[hit["document_id"]] = rank if best is None else min(best, rank or best)
    return ranks


def job_attempts(stack: LocalStack, job_id: str) -> int:
    engine = create_engine(stack.database_url)
    try:
        with engine.connect() as connection:
            sql = text("SELECT attempts FROM jobs WHERE job_id = :id")
            return int(connection.execute(sql, {"id": job_id}).scalar_one())
    finally:
        engine.dispose()


def test_a_document_is_seen_and_forgotten_by_every_api_process(stack: LocalStack) -> None:
    first, second = clients(stack, "scale-visible")
    aside = upload(stack, first, "pumps.txt", ASIDE)
    assert second.wait_job(aside["job_id"], timeout_s=60)["status"] == "done"
    # Both processes build their keyword index of the tenant before the upload, so seeing the
    # new document afterwards needs the cross-process freshness check, not a first build.
    for client in (first, second):
        assert document_ids(client.search(MARKER)) == {aside["document_id"]}

    job = upload(stack, first, "valves.txt", NOTE)
    done = second.wait_job(job["job_id"], timeout_s=60)
    assert done["status"] == "done", done
    assert first.job(job["job_id"])["status"] == "done"

    for client in (first, second):
        # Each process's own keyword index has the new document, ranked first on the marker.
        ranks = keyword_ranks(client.search(MARKER))
        assert ranks == {job["document_id"]: 1, aside["document_id"]: 2}
        answer = client.query(QUESTION)
        assert "30 days" in answer["answer"]
        assert "valves.txt" in [c["source"] for c in answer["citations"]]
    # The answer cache is shared: the second process served the first one's answer.
    assert second.query(QUESTION)["cache"] == "hit"

    assert first.delete(f"/documents/{job['document_id']}").status_code == 204
    # The cached answer died with the document: the first query after the delete is a miss.
    assert second.query(QUESTION)["cache"] == "miss"
    for client in (second, first):
        # Keyword rank 1 for the remaining document: the index itself forgot the deleted one
        # (a stale index would still rank it first, and the aside second).
        assert keyword_ranks(client.search(MARKER)) == {aside["document_id"]: 1}
        assert client.get(f"/documents/{job['document_id']}").status_code == 404
        after = client.query(QUESTION)
        assert "valves.txt" not in [c["source"] for c in after["citations"]]
        assert "30 days" not in after["answer"]
    assert second.get("/stats").json()["documents"] == 1


def test_a_job_whose_worker_is_killed_is_finished_by_another_worker(stack: LocalStack) -> None:
    first, second = clients(stack, "scale-crash")
    job = upload(stack, first, "maintenance.txt", maintenance_log(2300))

    # Kill the worker once some chunks are in the store but before the job is done: the retry
    # then re-writes chunks that already exist, which random ids would duplicate.
    deadline = time.monotonic() + 240  # embedding ~1150 chunks: ~6 s idle, minutes when busy
    stored = 0
    while time.monotonic() < deadline:
        stored = second.get("/stats").json()["chunks"]
        if stored > 0:
            break
        assert second.job(job["job_id"])["status"] in ("queued", "processing")
        time.sleep(0.02)
    stack.kill(api(stack, "w1"))
    state = second.job(job["job_id"])
    print(f"\nworker killed with {stored} chunks stored; job {state['status']} {state['progress']}")
    assert state["status"] == "processing", "the job finished before the kill; make it longer"
    assert stored > 0

    # API processes run no jobs and re-queue none (even once the heartbeat is stale); a worker
    # started afterwards notices the dead job and finishes it.
    time.sleep(float(stack.settings["RAG_JOB_STALE_AFTER_S"]) + 1)
    assert first.job(job["job_id"])["status"] == "processing"
    replacement = stack.start_worker("w2")
    stack.wait_worker_ready(replacement)
    done = first.wait_job(job["job_id"], timeout_s=240)
    assert done["status"] == "done", done
    assert job_attempts(stack, job["job_id"]) == 2

    document = second.get(f"/documents/{job['document_id']}").json()
    chunks = second.get("/stats").json()["chunks"]
    print(
        f"after the retry: store {chunks}, job {done['chunks_indexed']}, doc {document['chunks']}"
    )
    assert chunks == done["chunks_indexed"] == document["chunks"] > stored // 2
    hits = first.search("code R000000 logged by team 0")["results"]
    assert hits and hits[0]["source"] == "maintenance.txt"


def test_restarting_an_api_process_loses_nothing(stack: LocalStack) -> None:
    first, second = clients(stack, "scale-restart")
    job = upload(stack, first, "valves.txt", NOTE)
    assert second.wait_job(job["job_id"], timeout_s=60)["status"] == "done"
    assert second.query(QUESTION)["cache"] == "miss"
    before = second.get("/stats").json()
    # Another tenant's job is (probably) still running while API 2 restarts: an API process
    # starting up must not take a job away from a live worker.
    other, _ = clients(stack, "scale-restart-other")
    big = upload(stack, other, "maintenance.txt", maintenance_log(600))

    old = api(stack, "api2")
    stack.stop(old)
    restarted = stack.start_api("api2", port=old.port)
    stack.wait_ready(restarted)
    second = ApiClient(restarted.url, second.token)  # a token issued before the restart

    assert ApiClient(restarted.url, other.token).wait_job(big["job_id"])["status"] == "done"
    assert job_attempts(stack, big["job_id"]) == 1
    assert second.job(job["job_id"])["status"] == "done"
    listed = second.get("/documents").json()
    assert [d["source"] for d in listed["data"]] == ["valves.txt"]
    assert second.query(QUESTION)["cache"] == "hit"  # the answer cache survived in Redis
    assert document_ids(second.search(MARKER)) == {job["document_id"]}
    after = second.get("/stats").json()
    kept = ("documents", "chunks", "cache_entries", "cache_misses")
    assert {k: after[k] for k in kept} == {k: before[k] for k in kept}
    assert after["cache_hits"] == before["cache_hits"] + 1
    assert ApiClient(restarted.url).login("user-scale-restart")  # logins work again too
