"""The job table and the queue, below the services: from an accepted upload to a claimed job.

The rows (jobs, the tenants' last turns, which running jobs share a batch) are defined with
every other table in `app/storage/tables.py`. The uploads service accepts uploads here; the
code that runs claimed jobs is in `app/job_runners/`, above the services (the import-layer test
keeps this package from importing either).

- `store`: `JobStore`, the durable job state (create, reserve, claim, progress, end, requeue).
- `scheduling`: which queued jobs a worker gets next (fair across tenants, batched per tenant).
- `queue`: `enqueue`, the one way an upload's jobs reach a worker, and the `JobQueue` backend
  chosen by RAG_JOB_BACKEND (a `Container` component).
- `threads`: the in-process worker pool (`threads` backend), handed the function that runs a
  batch.
- `redis_queue`: the `redis` backend's API side (the worker side is
  `app/job_runners/redis_worker.py`; `python -m app.worker` is the entry point).
- `trace_carriers`: an upload's trace, kept by job id for the worker that runs it.
"""
