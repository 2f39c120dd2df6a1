"""Ingestion jobs, in one place: from an accepted upload to an indexed document.

The rows (jobs, the tenants' last turns, which running jobs share a batch) are defined with
every other table in `app/storage/tables.py`.

The job table and the queue (`store`, `scheduling`, `queue`, `threads`, `redis_queue`) are used
by the documents service to accept uploads; the job runners (`runner`, `batch`, `redis_worker`)
call the documents service to index, with the collaborators the container gives them
(`IngestDeps`). The import-layer test keeps the first half from importing the second.

- `store`: `JobStore`, the durable job state (create, reserve, claim, progress, end, requeue).
- `scheduling`: which queued jobs a worker gets next (fair across tenants, batched per tenant).
- `queue`: `enqueue`, the one way an upload's jobs reach a worker, and the `JobQueue` backend
  chosen by RAG_JOB_BACKEND (a `Container` component).
- `runner`: run one job and record how it ended; `batch`: run a batch of one tenant's jobs.
- `threads`: the in-process worker pool (`threads` backend), handed the function that runs a
  batch.
- `redis_queue` and `redis_worker`: the `redis` backend, API side and worker side
  (`python -m app.worker` is the entry point).
"""
