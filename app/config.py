"""One typed Settings object, read from `RAG_*` environment variables and `.env`.

Factories read it; leaf code receives plain values. `load_settings()` turns validation errors
into one message that names the offending environment variable.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.errors import ConfigurationError

ENV_PREFIX = "RAG_"

EmbeddingProvider = Literal["use", "e5", "huggingface", "openai", "ollama", "fake"]
LLMProvider = Literal["llamacpp", "ollama", "openai", "extractive", "fake"]
RerankerProvider = Literal["none", "cross-encoder"]
VectorBackend = Literal["chroma", "chroma-http"]
CacheBackend = Literal["memory", "redis"]
JobBackend = Literal["threads", "redis"]


class Settings(BaseSettings):
    """Every setting of the service; see `.env.example` for the documented list."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    # --- service ---
    env: Literal["development", "production"] = "production"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    data_dir: Path = Path("data")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    # --- ingestion ---
    chunk_size: int = Field(default=1000, gt=0, description="characters per chunk")
    chunk_overlap: int = Field(default=150, ge=0, description="characters shared by neighbours")
    max_upload_bytes: int = Field(default=50 * 1024 * 1024, gt=0)
    max_pages: int = Field(default=2000, gt=0)
    max_chars: int = Field(default=5_000_000, gt=0)
    max_archive_bytes: int = Field(default=200 * 1024 * 1024, gt=0, description="DOCX/XLSX/PPTX")
    max_archive_ratio: float = Field(default=100.0, gt=1)
    parse_timeout_s: float = Field(default=120.0, gt=0)
    parse_max_memory_mb: int = Field(
        default=2048, ge=64, description="address space of the parse child (RLIMIT_AS)"
    )
    parse_max_cpu_s: int = Field(default=120, gt=0, description="CPU seconds of the parse child")

    # --- embeddings ---
    embedding_provider: EmbeddingProvider = "use"
    embedding_model: str = ""
    embedding_query_prefix: str = ""
    embedding_passage_prefix: str = ""
    embedding_batch_size: int = Field(default=32, gt=0)
    # One BLAS thread per call: concurrent queries then share the cores instead of thrashing.
    embedding_threads: int = Field(default=1, gt=0, description="BLAS threads per embedding call")

    # --- OpenAI-compatible and Ollama servers ---
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    ollama_base_url: str = "http://127.0.0.1:11434"

    # --- vector store ---
    vector_backend: VectorBackend = "chroma"
    chroma_host: str = "127.0.0.1"
    chroma_port: int = Field(default=8001, ge=1, le=65535)

    # --- retrieval ---
    top_k: int = Field(default=5, gt=0)
    max_k: int = Field(default=50, gt=0)
    dense_candidates: int = Field(default=30, gt=0)
    keyword_candidates: int = Field(default=30, gt=0)
    rrf_k: int = Field(default=5, gt=0, description="RRF constant; 5 beat 60 on every eval set")
    dense_weight: float = Field(default=0.4, ge=0)
    keyword_weight: float = Field(default=1.0, ge=0)
    relevance_threshold: float | None = Field(
        default=None, description="minimum dense similarity; unset = calibrated per model"
    )

    # --- reranker ---
    reranker: RerankerProvider = "none"
    reranker_model: str = "cross-encoder/mmarco-mMiniLMv2-L12-H384-v1"
    reranker_max_candidates: int = Field(default=20, gt=0)
    reranker_max_chars: int = Field(default=1200, gt=0)
    reranker_batch_size: int = Field(default=16, gt=0)

    # --- generation ---
    llm_provider: LLMProvider = "llamacpp"
    llm_model: str = ""
    llm_model_path: Path | None = None
    llm_max_tokens: int = Field(default=256, gt=0)
    llm_context_tokens: int = Field(default=4096, gt=0)
    llm_threads: int = Field(default=2, gt=0)
    llm_timeout_s: float = Field(default=120.0, gt=0)
    llm_max_passages: int = Field(default=3, gt=0, description="passages shown to the LLM")
    llm_max_context_chars: int = Field(
        default=3000, gt=0, description="passage characters in the prompt (latency lever)"
    )
    models_dir: Path = Path("models")
    refusal_text: str = "I could not find the answer in the provided documents."
    llm_abstain_threshold: float = Field(
        default=0.02,
        ge=0,
        le=1,
        description="refuse when the local model's probability of starting the refusal is at "
        "least this (1 = only when it does refuse); 0.02 won on every held-out eval task",
    )

    # --- storage, jobs, cache ---
    database_url: str = ""
    redis_url: str = "redis://127.0.0.1:6379/0"
    job_backend: JobBackend = "threads"
    worker_pool_size: int = Field(default=2, gt=0)
    job_heartbeat_s: float = Field(
        default=5.0, gt=0, description="how often a worker touches its running job (redis jobs)"
    )
    job_stale_after_s: float = Field(
        default=60.0, gt=0, description="a processing job without heartbeat this long is re-run"
    )
    job_max_attempts: int = Field(default=3, ge=1, le=20)
    job_retry_base_s: float = Field(
        default=5.0, ge=0, description="first retry delay after a transient failure; x4 per try"
    )
    job_timeout_s: int = Field(default=3600, gt=0, description="hard limit on one ingestion job")
    redis_key_prefix: str = Field(
        default="rag", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$"
    )
    cache_backend: CacheBackend = "memory"
    cache_ttl_s: int = Field(default=3600, gt=0)
    cache_max_entries: int = Field(default=10_000, gt=0)

    # --- tenant quotas and job scheduling ---
    quota_documents: int = Field(default=10_000, gt=0, description="documents per tenant")
    quota_stored_bytes: int = Field(
        default=5 * 1024**3, gt=0, description="uploaded bytes of a tenant's documents"
    )
    quota_chunks: int = Field(default=500_000, gt=0, description="indexed chunks per tenant")
    quota_queued_jobs: int = Field(
        default=500, gt=0, description="ingestion jobs a tenant may have waiting or running"
    )
    max_running_jobs_per_tenant: int = Field(
        default=2, gt=0, description="jobs of one tenant processed at the same time"
    )
    ingest_batch_jobs: int = Field(
        default=32, ge=1, le=1000, description="queued jobs of one tenant indexed together"
    )
    ingest_batch_bytes: int = Field(
        default=1024 * 1024, gt=0, description="upload bytes a batch of jobs adds up to at most"
    )
    keyword_snapshots_kept: int = Field(
        default=2, ge=1, description="keyword index folders kept on disk per tenant"
    )

    # --- auth and abuse limits ---
    jwt_secret: str = ""
    jwt_issuer: str = "rag-service"
    jwt_audience: str = "rag-api"
    jwt_ttl_s: int = Field(default=3600, gt=0)
    bcrypt_rounds: int = Field(default=12, ge=12, le=16)
    rate_limit_auth_per_minute: int = Field(default=10, gt=0)
    rate_limit_query_per_minute: int = Field(default=120, gt=0)
    rate_limit_backend: CacheBackend = "memory"
    max_question_chars: int = Field(default=2000, gt=0)
    max_page_size: int = Field(default=100, gt=0)

    # --- tracing (off unless configured) ---
    langsmith_tracing: bool = False
    langsmith_api_key: str | None = None
    langsmith_project: str = "rag-service"

    @model_validator(mode="after")
    def _check_relations(self) -> Settings:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"{ENV_PREFIX}CHUNK_OVERLAP ({self.chunk_overlap}) must be smaller than "
                f"{ENV_PREFIX}CHUNK_SIZE ({self.chunk_size})"
            )
        if self.top_k > self.max_k:
            raise ValueError(f"{ENV_PREFIX}TOP_K must not exceed {ENV_PREFIX}MAX_K")
        if self.job_stale_after_s < 3 * self.job_heartbeat_s:
            raise ValueError(
                f"{ENV_PREFIX}JOB_STALE_AFTER_S must be at least 3 x {ENV_PREFIX}JOB_HEARTBEAT_S, "
                "or a slow heartbeat makes a live job look abandoned"
            )
        if self.job_backend == "redis" and self.vector_backend == "chroma":
            raise ValueError(
                f"{ENV_PREFIX}JOB_BACKEND=redis runs ingestion in separate worker processes, "
                "which cannot share an embedded Chroma directory; set "
                f"{ENV_PREFIX}VECTOR_BACKEND=chroma-http"
            )
        return self

    @property
    def sqlalchemy_url(self) -> str:
        """The user/job database; a SQLite file under the data directory by default."""
        return self.database_url or f"sqlite:///{(self.data_dir / 'rag.db').resolve()}"


def load_settings(**overrides: object) -> Settings:
    """Build Settings, or fail with a message naming each invalid `RAG_*` variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"])
            name = f"{ENV_PREFIX}{field.upper()}" if field else "settings"
            message = err["msg"].removeprefix("Value error, ")
            problems.append(f"{name}: {message} (got {err.get('input')!r})" if field else message)
        raise ConfigurationError("invalid configuration: " + "; ".join(problems)) from exc


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return load_settings()
