"""The settings of the database, Redis, jobs and the answer cache; tenant quotas and job scheduling.

Mixed with the other concerns into the one `app.config.Settings`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from app.config.fields import setting

CacheBackend = Literal["memory", "redis"]
JobBackend = Literal["threads", "redis"]


class StorageSettings(BaseModel):
    """The database, Redis, jobs and the answer cache; tenant quotas and job scheduling."""

    database_url: str = setting(
        "",
        group="storage",
        description="Users, jobs and chunk records; empty = SQLite file in the data dir. "
        "PostgreSQL: postgresql+psycopg://user:password@host:5432/dbname",
        repr=False,  # the password is in the URL
    )
    redis_url: str = setting(
        "redis://127.0.0.1:6379/0", group="storage", description="Redis.", repr=False
    )
    redis_key_prefix: str = setting(
        "rag",
        group="storage",
        description="Prefix of every Redis key and of the job queue name, so deployments can "
        "share one Redis.",
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",
    )
    job_backend: JobBackend = setting(
        "threads",
        group="storage",
        description="threads: in-process worker pool (one API process) | redis: separate worker "
        "processes (python -m app.worker); redis needs RAG_VECTOR_BACKEND=chroma-http.",
    )
    worker_pool_size: int = setting(
        2,
        group="storage",
        unit="threads",
        description="Threads of the in-process pool (threads backend only).",
        gt=0,
    )
    job_heartbeat_s: float = setting(
        5.0,
        group="storage",
        unit="s",
        description="redis backend: a worker touches its running job this often.",
        gt=0,
    )
    job_stale_after_s: float = setting(
        60.0,
        group="storage",
        unit="s",
        description="A job untouched this long (its worker died) is run again (at least 3 x "
        "RAG_JOB_HEARTBEAT_S).",
        gt=0,
    )
    job_max_attempts: int = setting(
        3,
        group="storage",
        unit="attempts",
        description="Runs of one job at most (after transient failures or dead workers).",
        ge=1,
        le=20,
    )
    job_retry_base_s: float = setting(
        5.0,
        group="storage",
        unit="s",
        description="Delay before retrying a job after a transient failure (server unreachable); "
        "x4 per attempt.",
        ge=0,
    )
    job_timeout_s: int = setting(
        3600,
        group="storage",
        unit="s",
        description="Hard limit on one run of an ingestion job (a batch of small jobs runs as "
        "one), on every job backend: past it the parse child is stopped and the job fails with "
        "`job_timeout` (never left `processing`). A scan that yields after a turn of pages "
        "(RAG_OCR_PAGES_PER_TURN) starts a new run when claimed again.",
        gt=0,
    )
    cache_backend: CacheBackend = setting(
        "memory",
        group="storage",
        description="Answer cache: memory | redis (shared by every API process).",
    )
    cache_ttl_s: int = setting(
        3600, group="storage", unit="s", description="How long a cached answer is kept.", gt=0
    )
    cache_max_entries: int = setting(
        10_000, group="storage", unit="answers", description="Cached answers per tenant.", gt=0
    )
    webhook_allow_private: bool = setting(
        False,
        group="storage",
        description="Allow webhook URLs that resolve to loopback, private, link-local (cloud "
        "metadata) or other non-public addresses: tests, a closed network. Off, such a URL is "
        "refused when the webhook is made and at every delivery. Production requires https "
        "either way.",
    )
    webhook_retry_base_s: float = setting(
        5.0,
        group="storage",
        unit="s",
        description="Wait before retrying a failed webhook delivery; it doubles per attempt, up "
        "to an hour, for 24 hours.",
        gt=0,
    )
    quota_documents: int = setting(
        10_000, group="quotas", unit="documents", description="Documents per tenant.", gt=0
    )
    quota_ocr_pages: int = setting(
        10_000,
        group="quotas",
        unit="pages",
        description="OCR'd pages a tenant's documents may hold (shown in /stats).",
        gt=0,
    )
    quota_stored_bytes: int = setting(
        5 * 1024**3,
        group="quotas",
        unit="bytes",
        description="Uploaded bytes of a tenant's documents.",
        gt=0,
    )
    quota_chunks: int = setting(
        500_000,
        group="quotas",
        unit="chunks",
        description="Indexed chunks per tenant; a document whose chunks would pass it fails its "
        "job the same way.",
        gt=0,
    )
    quota_queued_jobs: int = setting(
        500,
        group="quotas",
        unit="jobs",
        description="Ingestion jobs one tenant may have waiting or running (uploads in flight "
        "count too). Above it an upload gets 429 `quota_exceeded` with Retry-After before its "
        "body is read.",
        gt=0,
    )
    max_running_jobs_per_tenant: int = setting(
        2,
        group="quotas",
        unit="jobs",
        description="Jobs of one tenant processed at the same time. Workers take jobs fairly "
        "across tenants (fewest running first, then least recently served), so one tenant's "
        "burst does not starve another.",
        gt=0,
    )
    ingest_batch_jobs: int = setting(
        32,
        group="quotas",
        unit="jobs",
        description="A worker takes up to this many queued jobs of one tenant at once (their "
        "uploads within RAG_INGEST_BATCH_BYTES) and embeds and stores them together, so many "
        "small files ingest at embedding speed. Each job still succeeds or fails on its own; a "
        "batch counts as one running job of its tenant and one turn for fair scheduling. 1 = one "
        "job at a time.",
        ge=1,
        le=1000,
    )
    ingest_batch_bytes: int = setting(
        1024 * 1024,
        group="quotas",
        unit="bytes",
        description="Upload bytes a batch of jobs adds up to at most.",
        gt=0,
    )
    keyword_snapshots_kept: int = setting(
        2,
        group="quotas",
        unit="folders",
        description="Keyword index folders kept on disk per tenant (the current one included); "
        "older ones go.",
        ge=1,
    )
    hot_tenants: int = setting(
        64,
        group="quotas",
        unit="tenants",
        description="Tenants one process keeps in memory (keyword index, vector collection, "
        "and embedded Chroma's native HNSW index), least recently used evicted first; an "
        "evicted tenant's next search loads them from disk. A hot small tenant costs ~2.7 MB "
        "per process, a 10k-chunk one ~60 MB (bench/README.md, Many tenants).",
        ge=1,
    )
    memory_budget_mb: int = setting(
        0,
        group="quotas",
        unit="MB",
        description="Resident memory one process aims to stay under: after a tenant is evicted "
        "and the process is above it, freed heap is returned to the OS (malloc_trim). Size it "
        "as ~400 MB (models, runtime) + RAG_HOT_TENANTS x the cost of a hot tenant. 0 = trim "
        "after every eviction (at most once a second).",
        ge=0,
    )
    quota_conversations_per_user: int = setting(
        1000,
        group="quotas",
        unit="conversations",
        description="Conversations one user keeps (413 `quota_exceeded` when starting one more).",
        gt=0,
    )
    quota_users: int = setting(
        1000,
        group="quotas",
        unit="users",
        description="Users per tenant; adding one more (POST /users, the CLI's create-user) "
        "gets 413 `quota_exceeded`.",
        gt=0,
    )
    max_keys_per_user: int = setting(
        20,
        group="quotas",
        unit="keys",
        description="Working API keys one user may hold (revoked and expired ones do not "
        "count); making one more gets 413 `quota_exceeded`.",
        gt=0,
    )
    quota_conversation_messages: int = setting(
        1000,
        group="quotas",
        unit="messages",
        description="Messages one conversation takes over its life (two per turn; turns dropped "
        "by RAG_CONVERSATION_MAX_TURNS still count: then start a new conversation).",
        ge=2,
    )
    quota_conversation_bytes: int = setting(
        256 * 1024**2,
        group="quotas",
        unit="bytes",
        description="UTF-8 bytes of every stored question, answer and citation list of a tenant.",
        gt=0,
    )
