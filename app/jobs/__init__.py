"""Ingestion jobs, in one place: from an accepted upload to an indexed document.

- `tables`: the job rows, the tenants' last turns, and which running jobs share a batch.
- `store`: `JobStore`, the durable job state (create, reserve, claim, progress, end, requeue).
- `scheduling`: which queued jobs a worker gets next (fair across tenants, batched per tenant).
- `queue`: `enqueue`, the one way an upload's jobs reach a worker, and the `JobQueue` backend
  chosen by RAG_JOB_BACKEND (a `Container` component).
- `runner`: run one job and record how it ended; `batch`: run a batch of one tenant's jobs.
- `threads`: the in-process worker pool (`threads` backend).
- `redis_queue` and `redis_worker`: the `redis` backend, API side and worker side
  (`python -m app.worker` is the entry point).
"""
