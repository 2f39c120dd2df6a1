"""Small uploads indexed in batches: each job still ends on its own, with its own progress; the
chunks are those one-by-one ingestion stores; a crash or a failed shared step loses nothing.

Real stack (Chroma in a temp dir, the shipped `use` embedder); the tests claim and run batches
themselves (workers not started), so which jobs share a batch is exact.
"""

from __future__ import annotations

import threading
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest

from app.job_runners.runner import run_jobs
from testkit.builders import corrupt_pdf, text_document
from tests.api.harness import ApiFactory, ApiHarness, ApiUser
from tests.scans import scanned_page, scanned_pdf

pytestmark = pytest.mark.integration

# Paragraphs long enough that some files make several chunks, so per-job counts differ.
SENTENCE = "The {code} pump on line {n} is serviced by the night crew every {n} days. "


def body(code: str, paragraphs: int) -> bytes:
    """A text file with its own code word in every paragraph."""
    return text_document(*(SENTENCE.format(code=code, n=i) * 12 for i in range(paragraphs)))


FILES = {f"part{i}.txt": body(f"KESTREL{i}X", 1 + i % 3) for i in range(6)}


@pytest.fixture(scope="module")
def api(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(start_workers=False)


def upload_all(api: ApiHarness, user: ApiUser, files: dict[str, bytes]) -> list[str]:
    ids = []
    for name, content in files.items():
        response = api.upload(user, name, content)
        assert response.status_code == 202, response.text
        ids.append(response.json()["job_id"])
    return ids


def job(api: ApiHarness, user: ApiUser, job_id: str) -> Any:
    response = api.client.get(f"/jobs/{job_id}", headers=user.headers)
    assert response.status_code == 200, response.text
    return response.json()


def run_one_batch(api: ApiHarness, expected: int) -> None:
    batch = api.container.jobs.claim_batch(max_jobs=100)
    assert len(batch) == expected
    assert run_jobs(api.container.ingest_deps, batch) == []


def test_a_corrupt_file_in_a_batch_fails_only_its_own_job(api: ApiHarness) -> None:
    user = api.add_user("mixed")
    files = dict(FILES)
    files["broken.pdf"] = corrupt_pdf()
    ids = upload_all(api, user, files)
    run_one_batch(api, len(files))

    jobs = {name: job(api, user, job_id) for name, job_id in zip(files, ids, strict=True)}
    broken = jobs.pop("broken.pdf")
    assert broken["status"] == "failed"
    assert "damaged" in broken["error"].lower() or "corrupt" in broken["error"].lower()
    assert broken["chunks_indexed"] == 0
    for name, done in jobs.items():
        assert done["status"] == "done", done
        assert done["error"] is None and done["chunks_indexed"] >= 1 and done["pages"] == 1
        # Each job's progress is its own document's, not the batch's.
        assert done["progress"]["done"] == done["progress"]["total"] == done["chunks_indexed"]
        code = name.removeprefix("part").removesuffix(".txt")
        hits = api.search(user, f"KESTREL{code}X")["results"]
        assert hits and hits[0]["source"] == name, (name, hits)
    assert len({done["chunks_indexed"] for done in jobs.values()}) > 1  # counts differ per file
    listed = api.client.get("/documents", headers=user.headers).json()["data"]
    statuses = {document["source"]: document["status"] for document in listed}
    assert statuses.pop("broken.pdf") == "failed"
    assert set(statuses.values()) == {"done"}
    assert api.uploads_left() == []


def test_batched_and_one_by_one_ingestion_store_the_same_chunks(
    api: ApiHarness, api_factory: ApiFactory
) -> None:
    # The same tenant name in two apps, so chunk ids (derived from tenant and source) compare.
    single = api_factory(start_workers=False)
    one_user, batch_user = single.add_user("same"), api.add_user("same")
    upload_all(single, one_user, FILES)
    while (claimed := single.container.jobs.claim_next()) is not None:
        assert run_jobs(single.container.ingest_deps, [claimed]) == []
    upload_all(api, batch_user, FILES)
    run_one_batch(api, len(FILES))

    def stored(harness: ApiHarness) -> tuple[list[tuple[str, str]], dict[str, int]]:
        store = harness.container.corpus
        chunks = store.get_chunks(tenant_id="same", ids=sorted(store.chunk_ids("same")))
        listed = harness.client.get("/documents", headers=harness.users[-1].headers).json()
        return (
            [(chunk.id, chunk.text) for chunk in chunks],
            {document["source"]: document["chunks"] for document in listed["data"]},
        )

    assert stored(api) == stored(single)
    assert sum(stored(api)[1].values()) > len(FILES)  # some files made several chunks


class Crash(BaseException):
    """Stands in for the process dying mid-batch (not an error the worker may catch)."""


def record_claims(
    running: ApiHarness, monkeypatch: pytest.MonkeyPatch, hold_first: threading.Event | None = None
) -> list[int]:
    """The sizes of the batches the running workers claim from now on (empty claims left out);
    with `hold_first`, the worker that claims the first batch waits for it before running it."""
    jobs = running.container.jobs
    real_claim = jobs.claim_batch
    claimed: list[int] = []

    def recording_claim(*args: Any, **kwargs: Any) -> Any:
        batch = real_claim(*args, **kwargs)
        if batch:
            claimed.append(len(batch))
            if hold_first is not None and len(claimed) == 1:
                assert hold_first.wait(60)
        return batch

    monkeypatch.setattr(jobs, "claim_batch", recording_claim)
    return claimed


def test_a_lone_upload_starts_at_once_and_uploads_arriving_meanwhile_form_batches(
    api_factory: ApiFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Running workers this time (one thread, batches of at most 3): the first upload finds the
    # queue empty and is claimed alone at once, with no batch window to wait out;
    # the files uploaded while it is being indexed (a folder synced file by file) are claimed
    # together, at most RAG_INGEST_BATCH_JOBS at a time, and each job still ends on its own.
    running = api_factory(worker_pool_size=1, ingest_batch_jobs=3)
    busy = threading.Event()
    claimed = record_claims(running, monkeypatch, hold_first=busy)
    user = running.add_user("folder")
    files = dict(FILES)
    files["broken.pdf"] = corrupt_pdf()
    names = list(files)
    ids = upload_all(running, user, {names[0]: files[names[0]]})
    deadline = time.monotonic() + 30
    while not claimed:  # the lone upload is claimed without any other upload coming
        assert time.monotonic() < deadline, "the lone upload was never claimed"
        time.sleep(0.01)
    ids += upload_all(running, user, {name: files[name] for name in names[1:]})
    busy.set()
    ended = {
        name: running.wait_for_job(user, job_id) for name, job_id in zip(files, ids, strict=True)
    }
    assert claimed == [1, 3, 3]
    assert ended.pop("broken.pdf")["status"] == "failed"
    listed = running.client.get("/documents", headers=user.headers).json()["data"]
    chunks = {document["source"]: document["chunks"] for document in listed}
    for name, done in ended.items():
        assert done["status"] == "done", done
        assert done["chunks_indexed"] == chunks[name] >= 1
        code = name.removeprefix("part").removesuffix(".txt")
        hits = running.search(user, f"KESTREL{code}X")["results"]
        assert hits and hits[0]["source"] == name, (name, hits)
    assert running.uploads_left() == []


def test_a_crash_mid_batch_loses_nothing_and_duplicates_nothing(
    api: ApiHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = api.add_user("crash")
    ids = upload_all(api, user, FILES)
    jobs = api.container.jobs
    batch = jobs.claim_batch(max_jobs=100)
    documents = api.container.documents

    def die(*args: Any, **kwargs: Any) -> None:
        raise Crash

    # The process dies once the batch's chunks are stored, while its documents are recorded.
    monkeypatch.setattr(documents, "record_indexed", die)
    with pytest.raises(Crash):
        run_jobs(api.container.ingest_deps, batch)
    monkeypatch.undo()
    assert {job(api, user, job_id)["status"] for job_id in ids} == {"processing"}

    # The next start re-queues what the crash left; a worker runs it again.
    assert jobs.requeue_stale() == len(ids)
    run_one_batch(api, len(ids))
    ended = [job(api, user, job_id) for job_id in ids]
    assert {done["status"] for done in ended} == {"done"}
    store = api.container.corpus
    assert store.count("crash") == sum(done["chunks_indexed"] for done in ended)
    assert len(set(store.chunk_ids("crash"))) == store.count("crash")
    assert api.uploads_left() == []


def test_when_the_shared_store_write_fails_each_job_is_run_on_its_own(
    api: ApiHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = api.add_user("fallback")
    ids = upload_all(api, user, dict(list(FILES.items())[:3]))
    store = api.container.corpus
    real_write = store.replace_documents
    writes: list[int] = []

    def refuse_the_first(**write: Any) -> None:
        writes.append(len(write["documents"]))
        if len(writes) == 1:
            raise RuntimeError("batch write refused")
        real_write(**write)

    monkeypatch.setattr(store, "replace_documents", refuse_the_first)
    run_one_batch(api, 3)
    assert writes == [3, 1, 1, 1]  # the batch's write, then one write per job on its own
    assert {job(api, user, job_id)["status"] for job_id in ids} == {"done"}
    assert api.search(user, "KESTREL2X")["results"][0]["source"] == "part2.txt"


def test_a_tenant_over_its_chunk_quota_in_a_batch_fails_only_the_jobs_past_it(
    api_factory: ApiFactory,
) -> None:
    small = api_factory(start_workers=False, quota_chunks=3)
    user = small.add_user("quota")
    files = {f"q{i}.txt": text_document(f"Part QUOTA{i}Z fits valve {i}.") for i in range(5)}
    ids = upload_all(small, user, files)
    run_one_batch(small, 5)
    statuses = [job(small, user, job_id)["status"] for job_id in ids]
    # As one by one: the first three fit, the later ones find the quota used up.
    assert statuses == ["done", "done", "done", "failed", "failed"]
    assert "quota" in job(small, user, ids[3])["error"]
    assert [job(small, user, job_id)["chunks_indexed"] for job_id in ids[:3]] == [1, 1, 1]


def test_the_cli_queues_files_as_jobs_the_service_runs(
    api_factory: ApiFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import cmd_ingest

    running = api_factory()
    user = running.add_user("cli")
    paths = []
    for name, content in list(FILES.items())[:2]:
        paths.append(tmp_path / name)
        paths[-1].write_bytes(content)
    assert cmd_ingest(running.container, Namespace(tenant="cli", paths=paths, queue=True)) == 0
    printed = capsys.readouterr().out.splitlines()
    job_ids = [line.split(" queued as ")[1].split()[0] for line in printed]
    for job_id in job_ids:
        assert running.wait_for_job(user, job_id)["status"] == "done"
    assert running.search(user, "KESTREL1X")["results"][0]["source"] == "part1.txt"
    assert all(path.exists() for path in paths)  # the CLI queued copies, not the user's files
    assert running.uploads_left() == []


def test_the_ocr_page_quota_counts_the_scans_before_a_file_in_its_batch(
    api_factory: ApiFactory,
) -> None:
    quota = api_factory(start_workers=False, quota_ocr_pages=3)
    user = quota.add_user("scans")
    page = scanned_page(["The heron valve is checked every week."], dpi=150)
    files = {"two.pdf": scanned_pdf([page, page], dpi=150), "more.pdf": scanned_pdf([page] * 2)}
    ids = upload_all(quota, user, files)
    run_one_batch(quota, len(files))
    first, second = (job(quota, user, job_id) for job_id in ids)
    assert first["status"] == "done", first
    # 2 of the 3 pages went to the first scan of the batch: the second's 2 pages are refused.
    assert second["status"] == "failed" and second["error_code"] == "quota_exceeded", second
    assert "1 remain" in second["error"], second
