"""Running ingestion jobs, above the services: what the API's thread pool and `python -m
app.worker` processes do with the jobs they claim.

- `runner`: `IngestDeps` and `run_jobs`, which hands a claimed batch of one tenant's jobs to the
  indexing service (`index_documents`) and records how each job ended.
- `redis_worker`: one worker process's turns (claim a batch, run it with a heartbeat, schedule
  retries) and the sweeper that keeps the rq queue honest against the job table.
- `redis_tasks`: the rq worker, which runs only the service's own task.

The job table and the queue they claim from are in `app/jobs/`, below the services.
"""
