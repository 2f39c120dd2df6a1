"""Fair job scheduling: how long a tenant's single upload takes to be indexed while another
tenant has a burst of hundreds queued, against the same upload on an idle queue.

The real ingestion path in one process: the upload service (job slot reserved, file stored,
job queued), the in-process worker pool (RAG_JOB_BACKEND=threads, RAG_WORKER_POOL_SIZE
threads), the shipped `use` embedder, embedded Chroma and SQLite. Tenant A queues `--burst`
files; once the workers are busy with them, tenant B uploads one file, `--rounds` times, and
the time from B's upload to B's job being done is taken. With first-in-first-out claims B would
wait for A's whole queue; the table shows that too (A's drain time, measured in the same run).

    python -m bench.fairness [--burst 300] [--rounds 5] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from sqlalchemy import func, select

from app.config import load_settings
from app.container import Container
from app.job_runners.runner import run_jobs
from app.jobs.store import JobRecord
from app.jobs.threads import IngestWorkerPool
from app.services.uploads import ReceivedFile, reserve_upload, submit_uploads
from app.storage.tables import JobRow
from bench.common import median, percentile, table
from eval.datasets import data_dir

DATA = data_dir()
POLL_S = 0.02


def _paragraphs() -> list[str]:
    """Real XQuAD paragraphs (English and Arabic) to fill the uploads with."""
    texts: list[str] = []
    for lang in ("en", "ar"):
        raw = json.loads((DATA / "xquad" / f"xquad.{lang}.json").read_text(encoding="utf-8"))
        texts += [p["context"] for art in raw["data"] for p in art["paragraphs"]]
    return texts


class Uploader:
    """Puts files through the upload service as the route does, and waits for their jobs."""

    def __init__(self, container: Container, folder: Path, paragraphs: list[str]) -> None:
        self.container = container
        self.folder = folder
        self.paragraphs = paragraphs
        self.count = 0

    def upload(self, tenant: str, per_file: int) -> JobRecord:
        """Queue one file of `per_file` paragraphs for `tenant`; returns its job."""
        self.count += 1
        start = self.count * per_file
        body = "\n\n".join(
            self.paragraphs[(start + j) % len(self.paragraphs)] for j in range(per_file)
        )
        path = self.folder / f"upload-{self.count:05d}.txt"
        path.write_text(body, encoding="utf-8")
        reservation = reserve_upload(self.container.upload_deps, tenant_id=tenant)
        received = ReceivedFile(path, f"{tenant}-{self.count}.txt", path.stat().st_size)
        (job,) = submit_uploads(
            self.container.upload_deps,
            tenant_id=tenant,
            reservations=[reservation],
            files=[received],
        )
        return job

    def wait(self, tenant: str, job_id: str, timeout_s: float = 1800.0) -> None:
        """Block until the job is done (raises if it fails or takes too long)."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.container.jobs.get(tenant, job_id)
            assert job is not None
            if job.status == "done":
                return
            if job.status == "failed" or time.monotonic() > deadline:
                raise RuntimeError(f"job {job_id} ended {job.status}: {job.error}")
            time.sleep(POLL_S)

    def done_count(self, tenant: str, job_ids: list[str]) -> int:
        """How many of the jobs are done."""
        records = [self.container.jobs.get(tenant, job_id) for job_id in job_ids]
        return sum(1 for job in records if job is not None and job.status == "done")

    def finished_between(self, tenant: str, job_id: str, other: str) -> int:
        """How many of `other`'s jobs finished while `job_id` (of `tenant`) was queued or running:
        the jobs it waited behind, plus those other workers finished meanwhile."""
        job = self.container.jobs.get(tenant, job_id)
        assert job is not None
        with self.container.database.session() as session:
            count = session.scalar(
                select(func.count())
                .select_from(JobRow)
                .where(
                    JobRow.tenant_id == other,
                    JobRow.status == "done",
                    JobRow.updated_at > job.created_at,
                    JobRow.updated_at < job.updated_at,
                )
            )
        return int(count or 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--burst", type=int, default=300, help="files tenant A queues at once")
    parser.add_argument("--rounds", type=int, default=5, help="single uploads timed per case")
    parser.add_argument("--workers", type=int, default=2, help="RAG_WORKER_POOL_SIZE")
    parser.add_argument("--paragraphs", type=int, default=2, help="XQuAD paragraphs per file")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        settings = load_settings(
            _env_file=None,
            data_dir=root / "data",
            embedding_provider="use",
            llm_provider="extractive",
            env="development",
            worker_pool_size=args.workers,
            quota_queued_jobs=max(500, args.burst + args.rounds + 10),
        )
        container = Container(settings)
        container.warm_up(serving=False)
        uploads = root / "data" / "uploads"
        uploads.mkdir(parents=True)
        uploader = Uploader(container, uploads, _paragraphs())
        pool = IngestWorkerPool(
            container.jobs,
            lambda batch: run_jobs(container.ingest_deps, batch),
            settings,
            poll_interval_s=POLL_S,
        )
        pool.start()
        try:
            # Alone: B's upload on an idle queue.
            alone = []
            for _ in range(args.rounds):
                started = time.perf_counter()
                job = uploader.upload("tenant-b", args.paragraphs)
                pool.enqueue(job)
                uploader.wait("tenant-b", job.job_id)
                alone.append(time.perf_counter() - started)

            # Behind a burst: A queues `burst` files, then B uploads one at a time.
            burst_started = time.perf_counter()
            bulk_jobs = [uploader.upload("tenant-a", args.paragraphs) for _ in range(args.burst)]
            pool.enqueue(bulk_jobs[-1])
            bulk = [job.job_id for job in bulk_jobs]
            queued_s = time.perf_counter() - burst_started
            behind, a_done_meanwhile = [], []
            for _ in range(args.rounds):
                time.sleep(0.5)  # the workers are busy with A's jobs when B arrives
                started = time.perf_counter()
                job = uploader.upload("tenant-b", args.paragraphs)
                pool.enqueue(job)
                uploader.wait("tenant-b", job.job_id)
                behind.append(time.perf_counter() - started)
                a_done_meanwhile.append(
                    uploader.finished_between("tenant-b", job.job_id, "tenant-a")
                )
            still_queued = args.burst - uploader.done_count("tenant-a", bulk)
            for job_id in bulk:
                uploader.wait("tenant-a", job_id)
            drain_s = time.perf_counter() - burst_started
        finally:
            pool.stop()
            container.database.dispose()

    per_job_s = drain_s / args.burst
    print(
        f"{args.burst} files queued by A in {queued_s:.1f} s; {args.workers} workers; A's queue "
        f"drained in {drain_s:.1f} s ({per_job_s * 1000:.0f} ms per job); {still_queued} of A's "
        "jobs were still queued after B's last upload"
    )
    print(
        table(
            [
                "case",
                "B upload -> done p50 s",
                "p95 s",
                "A jobs done while B waited+ran (max)",
                "ratio",
            ],
            [
                ["B alone (idle queue)", median(alone), percentile(alone, 95), 0, 1.0],
                [
                    f"B while A has ~{args.burst} queued",
                    median(behind),
                    percentile(behind, 95),
                    max(a_done_meanwhile),
                    median(behind) / median(alone),
                ],
                [
                    "first-in-first-out (B behind all of A: A's drain time)",
                    drain_s,
                    drain_s,
                    args.burst,
                    drain_s / median(alone),
                ],
            ],
        )
    )


if __name__ == "__main__":
    main()
