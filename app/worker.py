"""`python -m app.worker`: an ingestion worker process for RAG_JOB_BACKEND=redis.

It loads the models once, then takes job ids from the rq queue, one turn at a time, in this
process (rq's `SimpleWorker`: no fork per job, so the embedder stays loaded). Run as many as the
machine has cores for (`docker compose up --scale worker=N`). What a turn and the sweeper do is
in app/job_runners/redis_worker.py; this module is the entry point and holds the rq task, whose
import path (`app.worker.process_job`) messages already in Redis name.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import redis

from app import metrics, tracing
from app.config import SERVICE_VERSION, Settings, get_settings, warn_of_unknown_settings
from app.container import Container
from app.errors import ConfigurationError
from app.job_runners.redis_worker import IngestWorker
from app.jobs.redis_queue import queue_name, rq_queue
from app.observability import configure_logging
from app.providers.types import ProviderOverrides
from app.storage.redis_client import connect_redis

if TYPE_CHECKING:
    from app.job_runners.redis_tasks import ServiceWorker

log = logging.getLogger("app.worker")
# How often a worker whose rq loop ended on an error asks whether Redis answers again.
REDIS_RETRY_S = 1.0

_current: IngestWorker | None = None


def process_job(job_id: str) -> str:
    """The rq task: run a job id in this worker process."""
    if _current is None:
        raise RuntimeError("process_job runs only inside `python -m app.worker`")
    return _current.process(job_id)


def work_until_stopped(worker: ServiceWorker, *, burst: bool, logging_level: str) -> None:
    """Run rq's loop until a signal stops it (or, in a burst, the queue is empty).

    rq leaves its loop on an error outside its wait for messages, such as Redis gone while it
    records the end of a message (a Redis restart during a job); the process would then exit
    with nothing left to take the queue's messages. So the loop is run again once Redis answers.
    """
    while True:
        try:
            worker.work(burst=burst, with_scheduler=True, logging_level=logging_level)
        except redis.RedisError:  # rq's teardown could not reach Redis either
            log.warning("rq's worker loop ended without Redis", exc_info=True)
        if burst or worker.stop_requested:
            return
        log.warning("rq's worker loop ended on an error; listening again once Redis answers")
        _wait_for_redis(worker)


def _wait_for_redis(worker: ServiceWorker) -> None:
    """Block until Redis answers (or a stop is asked for), then mark the worker's last run
    dead, so the next run may register under the same name."""
    while not worker.stop_requested:
        time.sleep(REDIS_RETRY_S)
        try:
            worker.register_death()  # type: ignore[no-untyped-call]
            return
        except redis.RedisError:
            continue


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m app.worker", description=__doc__)
    parser.add_argument("--name", help="worker name shown by `rq info` (default: host.pid)")
    parser.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    parser.add_argument(
        "--health-file", type=Path, help="touched after every successful sweep (health checks)"
    )
    return parser.parse_args(argv)


def start_metrics(settings: Settings, container: Container) -> None:
    """Record metrics in this worker (summed by a scrape of the shared PROMETHEUS_MULTIPROC_DIR),
    also served on RAG_METRICS_PORT when no other process of this host serves it."""
    metrics.enable(settings.metrics_tenants)
    metrics.build_info(SERVICE_VERSION, container.embedder.model_id, settings.llm_provider)
    if settings.metrics_port:
        metrics.serve_on_port(settings.metrics_port, settings.metrics_bind_host)


def main(argv: list[str] | None = None, *, providers: ProviderOverrides | None = None) -> int:
    """Load models, then process ingestion messages until SIGTERM (finishes the current job).
    `providers` replaces the configured embedder (a benchmark's wrapped model)."""
    global _current
    args = _parse(argv)
    try:
        settings = get_settings()
    except ConfigurationError as exc:
        sys.exit(f"error: {exc}")
    if settings.job_backend != "redis":
        sys.exit("error: set RAG_JOB_BACKEND=redis; with `threads` the API process runs the jobs")
    configure_logging(settings.log_level)
    warn_of_unknown_settings(log)
    from app.job_runners.redis_tasks import rq_worker

    tracing.configure(settings)
    container = Container(settings, providers)
    container.warm_up(serving=False)
    if settings.metrics_enabled:
        start_metrics(settings, container)
    # The sweeper and the retries use short timeouts; rq's blocking pop needs none.
    _current = IngestWorker(settings, container.ingest_deps, connect_redis(settings.redis_url))
    name = args.name or f"{queue_name(settings)}.{socket.gethostname()}.{os.getpid()}"
    listen = redis.Redis.from_url(settings.redis_url)
    worker = rq_worker(rq_queue(settings, listen), listen, name)
    stop = threading.Event()
    sweeper = threading.Thread(
        target=_current.run_sweeper, args=(stop, args.health_file), daemon=True
    )
    sweeper.start()
    container.webhook_dispatcher.start()  # webhook events go out from the job runners
    log.info("worker %s ready on queue %s", name, queue_name(settings))
    try:
        work_until_stopped(worker, burst=args.burst, logging_level=settings.log_level)
    finally:
        stop.set()
        container.webhook_dispatcher.stop()
        container.database.dispose()
        tracing.shutdown()
    return 0


if __name__ == "__main__":
    # rq imports the task as `app.worker.process_job`; run `main` in that module, not in
    # `__main__`, so the task sees the worker this process built.
    from app import worker

    sys.exit(worker.main())
