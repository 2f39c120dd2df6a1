"""One typed Settings object, read from `RAG_*` environment variables and `.env`.

Factories read it; leaf code receives plain values. `load_settings()` turns validation errors
into one message that names the offending environment variable.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.errors import ConfigurationError
from app.limits import K_CEILING, PAGE_SIZE_CEILING, QUESTION_CHARS_CEILING

ENV_PREFIX = "RAG_"

# The provider names Settings accepts; the factories in app/providers build each one, and their
# `register_llm` / `register_embedder` add a name here too (tests register their fakes so).
LLM_PROVIDERS: set[str] = {"llamacpp", "ollama", "openai", "extractive"}
EMBEDDING_PROVIDERS: set[str] = {"use", "e5", "huggingface", "openai", "ollama"}
RerankerProvider = Literal["none", "cross-encoder"]
VectorBackend = Literal["chroma", "chroma-http"]
CacheBackend = Literal["memory", "redis"]
JobBackend = Literal["threads", "redis"]
# Which retrieval arms index a chunk with its section path (app/ingestion/section_paths.py).
SectionPathArms = Literal["both", "keyword", "dense", "off"]


# The longest access token lifetime RAG_JWT_TTL_S accepts: one day (README, "Tokens and keys").
JWT_TTL_CAP_S = 24 * 3600


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
    section_paths: SectionPathArms = Field(
        default="off",
        description="which arms index each chunk with its chapter › section path (PDF outline, "
        "DOCX heading styles, Markdown headings): both, keyword, dense or off (measured: no "
        "setting wins on every manual's test part, docs/evaluation.md); re-ingest documents "
        "after changing it",
    )
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
    # --- OCR of scanned pages and images (Tesseract, app/ingestion/ocr.py) ---
    ocr_tesseract_cmd: str = Field(
        default="tesseract", description="the Tesseract program (a name on PATH or a path)"
    )
    ocr_dpi: int = Field(
        default=200,
        ge=72,
        le=600,
        description="resolution scanned PDF pages are OCR'd at (measured: 200 reads as well as "
        "300, in English and Arabic, from 8 pt text up, and takes a third less time)",
    )
    ocr_max_pages: int = Field(default=200, gt=0, description="pages OCR'd per document at most")
    ocr_max_image_pixels: int = Field(
        default=60_000_000, gt=0, description="pixels of one image or page picture to OCR"
    )
    ocr_page_timeout_s: float = Field(default=60.0, gt=0, description="wall time per OCR page")
    quota_ocr_pages: int = Field(
        default=10_000, gt=0, description="OCR'd pages a tenant's documents may hold"
    )

    # --- embeddings ---
    embedding_provider: str = "use"  # one of EMBEDDING_PROVIDERS
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

    # --- web app, API docs, cited page images ---
    docs_enabled: bool | None = Field(
        default=None, description="/docs and /redoc; unset = on in development, off in production"
    )
    page_image_max_px: int = Field(
        default=1600, ge=200, le=4000, description="longest side of a rendered page image"
    )
    page_image_cache_mb: int = Field(default=64, ge=0, description="rendered pages kept in memory")
    page_render_timeout_s: float = Field(
        default=20.0, gt=0, description="a page render taking longer is stopped (409)"
    )
    page_render_slots: int = Field(
        default=2, ge=1, le=64, description="page renders at once per API process"
    )
    page_render_max_wait_s: float = Field(
        default=1.5, ge=0, le=30, description="wait for a render slot, then 429/503"
    )
    page_render_max_memory_mb: int = Field(
        default=1024, ge=128, description="address space of the render child (RLIMIT_AS)"
    )
    page_render_max_cpu_s: int = Field(
        default=30, gt=0, description="CPU seconds of the render child (RLIMIT_CPU)"
    )
    page_render_max_image_mp: int = Field(
        default=64, gt=0, description="megapixels of images one page may decode (else 409)"
    )
    page_render_failure_ttl_s: float = Field(
        default=600.0, ge=0, description="a page that failed to render answers 409 at once"
    )

    # --- vector store ---
    vector_backend: VectorBackend = "chroma"
    chroma_host: str = "127.0.0.1"
    chroma_port: int = Field(default=8001, ge=1, le=65535)
    # Sent as "Authorization: Bearer <token>" to a Chroma server run with token authentication.
    chroma_token: str = Field(default="", repr=False)

    # --- retrieval ---
    top_k: int = Field(default=5, gt=0)
    max_k: int = Field(default=50, gt=0, le=K_CEILING)
    dense_candidates: int = Field(default=30, gt=0)
    keyword_candidates: int = Field(default=30, gt=0)
    rrf_k: int = Field(default=5, gt=0, description="RRF constant; 5 beat 60 on every eval set")
    # 0.3 won held out (eval/tune_fusion.py: tuned on ARCD train + XQuAD dev, issue 16).
    dense_weight: float = Field(default=0.3, ge=0)
    keyword_weight: float = Field(default=1.0, ge=0)
    relevance_threshold: float | None = Field(
        default=None, description="minimum dense similarity; unset = calibrated per model"
    )
    # Issue 16: keyword weight scaled by coverage ** power (0 = off); role pages yield places.
    keyword_coverage_power: float = Field(default=1.0, ge=0)
    cross_script_rrf_k: int = Field(
        default=0, ge=0, description="RRF k for queries in a script the tenant lacks (0: off)"
    )
    cross_script_dense_weight: float = Field(default=1.0, ge=0)
    specific_evidence_max_chunks: int = Field(
        default=2,
        ge=0,
        description="keyword arm at least as heavy as dense when at most this many chunks hold "
        "all of the query's numbers and other-script words (0: off)",
    )
    page_role_shift: int = Field(
        default=10, ge=0, description="places contents/index/... pages yield to content pages"
    )

    # --- reranker ---
    reranker: RerankerProvider = "none"
    reranker_model: str = "cross-encoder/mmarco-mMiniLMv2-L12-H384-v1"
    reranker_max_candidates: int = Field(default=20, gt=0)
    reranker_max_chars: int = Field(default=1200, gt=0)
    reranker_batch_size: int = Field(default=16, gt=0)

    # --- generation ---
    llm_provider: str = "llamacpp"  # one of LLM_PROVIDERS
    llm_model: str = ""
    llm_model_path: Path | None = None
    llm_max_tokens: int = Field(default=256, gt=0)
    llm_context_tokens: int = Field(default=4096, gt=0)
    llm_threads: int = Field(default=2, gt=0)
    llm_prefix_cache: bool = Field(
        default=True,
        description="local model: evaluate the prompt's fixed instructions and examples once and "
        "restore that state for every answer (false: llama.cpp's own reuse of the last prompt)",
    )
    llm_timeout_s: float = Field(default=120.0, gt=0)
    llm_max_passages: int = Field(default=3, gt=0, description="passages shown to the LLM")
    llm_max_context_chars: int = Field(
        default=3000, gt=0, description="passage characters in the prompt (latency lever)"
    )
    llm_focus_chars: int = Field(
        default=700,
        ge=0,
        description="cut the shown passages to the question's best sentences, this many "
        "characters in all (0: whole passages); the main lever on time to first token",
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

    # --- answer concurrency ---
    # Per API process (see README "Capacity and backpressure"). Answers beyond the bounds wait
    # in a bounded queue on the event loop, then get 429 (own user/tenant) or 503 (server busy).
    answer_max_concurrent: int = Field(
        default=1, gt=0, description="answers generating at once (the one local model: 1)"
    )
    answer_max_per_tenant: int = Field(default=1, gt=0)
    answer_max_per_user: int = Field(default=1, gt=0)
    answer_queue_size: int = Field(default=8, ge=0, description="answers waiting, in total")
    answer_queue_per_tenant: int = Field(default=4, ge=0, description="answers waiting per tenant")
    answer_queue_max_wait_s: float = Field(default=30.0, ge=0)
    stream_max_open: int = Field(default=32, gt=0, description="open /query/stream responses")
    stream_max_per_tenant: int = Field(default=8, gt=0)
    stream_max_per_user: int = Field(default=4, gt=0)

    # --- conversations and /v1/chat/completions ---
    conversation_max_turns: int = Field(
        default=20, gt=0, description="turns kept per conversation; the oldest are dropped"
    )
    conversation_context_turns: int = Field(
        default=3, gt=0, description="latest turns shown to the follow-up rewriter"
    )
    conversation_rewrite: Literal["llm", "fallback"] = Field(
        default="llm",
        description="rewrite follow-ups with the LLM (falling back when it fails) or never",
    )
    conversation_rewrite_timeout_s: float = Field(
        default=20.0, gt=0, description="LLM rewrite budget before the fallback is used"
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
    quota_conversations_per_user: int = Field(
        default=1000, gt=0, description="conversations one user may keep"
    )
    quota_conversation_messages: int = Field(
        default=1000, ge=2, description="messages one conversation takes over its life (2 a turn)"
    )
    quota_conversation_bytes: int = Field(
        default=256 * 1024**2, gt=0, description="stored conversation text per tenant (UTF-8)"
    )

    # --- auth and abuse limits ---
    jwt_secret: str = ""
    jwt_issuer: str = "rag-service"
    jwt_audience: str = "rag-api"
    # Capped: a token that leaks (a log, a shared screen) works until it expires unless someone
    # signs it out, and a day bounds that window even when nobody notices.
    jwt_ttl_s: int = Field(default=3600, gt=0, le=JWT_TTL_CAP_S)
    # The server secret API keys are hashed with (HMAC-SHA256); empty: derived from the JWT
    # secret, so rotating RAG_JWT_SECRET then invalidates every key too.
    api_key_secret: str = Field(default="", repr=False)
    revocation_backend: Literal["database", "redis"] = Field(
        default="database", description="where signed-out tokens are kept (redis: RAG_REDIS_URL)"
    )
    audit_retention_days: int = Field(
        default=365, ge=1, le=36500, description="audit log entries older than this are deleted"
    )
    bcrypt_rounds: int = Field(default=12, ge=12, le=16)
    rate_limit_auth_per_minute: int = Field(default=10, gt=0)
    rate_limit_query_per_minute: int = Field(default=120, gt=0)
    rate_limit_pages_per_minute: int = Field(default=120, gt=0)
    rate_limit_conversations_per_minute: int = Field(
        default=30, gt=0, description="conversations one user may start per minute"
    )
    rate_limit_backend: CacheBackend = "memory"
    # Capped by the request models' own bounds (app.limits), so every configured cap is reachable.
    max_question_chars: int = Field(default=2000, gt=0, le=QUESTION_CHARS_CEILING)
    max_page_size: int = Field(default=100, gt=0, le=PAGE_SIZE_CEILING)

    # --- HTTP limits and proxies ---
    # Every body but an upload is a small JSON or form document; counted as it arrives, before
    # authentication, so an anonymous client cannot make the API process buffer megabytes.
    max_body_bytes: int = Field(
        default=64 * 1024, ge=4096, description="largest JSON/form body (every route but uploads)"
    )
    # X-Forwarded-For/-Proto/-Prefix are believed only from these peers (IPs or CIDRs).
    trusted_proxies: str = Field(default="", description="comma-separated IPs or CIDRs")
    root_path: str = Field(default="", description="path prefix the gateway serves us under")
    login_failures_per_minute: int = Field(
        default=5, gt=0, description="wrong passwords per (user name, client IP) per minute"
    )
    login_account_failures_per_minute: int = Field(
        default=20,
        gt=0,
        description="wrong passwords per user name per minute from all clients before checks "
        "from clients new to it are paced",
    )
    login_concurrency: int = Field(default=2, gt=0, description="bcrypt checks at once")
    login_queue: int = Field(default=8, ge=0, description="logins that may wait for a check")
    exact_max_terms: int = Field(default=16, gt=0, description="literal terms checked per query")
    exact_max_phrases: int = Field(default=4, gt=0, description="quoted phrases per query")
    exact_max_scans: int = Field(default=4, ge=0, description="substring scans per query")
    exact_verify_budget: int = Field(
        default=400, ge=0, description="chunk texts fetched to verify phrases, per query"
    )

    # --- tracing (off unless configured) ---
    langsmith_tracing: bool = False
    langsmith_api_key: str | None = None
    langsmith_project: str = "rag-service"

    @field_validator("embedding_provider")
    @classmethod
    def _known_embedding_provider(cls, value: str) -> str:
        return _registered(value, EMBEDDING_PROVIDERS)

    @field_validator("llm_provider")
    @classmethod
    def _known_llm_provider(cls, value: str) -> str:
        return _registered(value, LLM_PROVIDERS)

    @field_validator("trusted_proxies")
    @classmethod
    def _check_proxies(cls, value: str) -> str:
        for entry in _split_list(value):
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or CIDR network") from None
        return value

    @field_validator("root_path")
    @classmethod
    def _check_root_path(cls, value: str) -> str:
        value = value.rstrip("/")
        if value and (not value.startswith("/") or "//" in value or "?" in value):
            raise ValueError("must be empty or a path such as /rag")
        return value

    @model_validator(mode="after")
    def _check_relations(self) -> Settings:
        # A question of RAG_MAX_QUESTION_CHARS, JSON-escaped at 6 bytes a character, must fit.
        if self.max_body_bytes < 6 * self.max_question_chars + 1024:
            raise ValueError(
                f"{ENV_PREFIX}MAX_BODY_BYTES ({self.max_body_bytes}) is too small for "
                f"{ENV_PREFIX}MAX_QUESTION_CHARS ({self.max_question_chars}); allow at least "
                "6 bytes per character plus 1024"
            )
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

    def section_paths_in(self, arm: Literal["keyword", "dense"]) -> bool:
        """Whether this retrieval arm indexes chunks with their section path."""
        return self.section_paths in ("both", arm)

    @property
    def trusted_proxy_list(self) -> list[str]:
        """RAG_TRUSTED_PROXIES as a list of IPs and CIDR networks."""
        return _split_list(self.trusted_proxies)

    @property
    def sqlalchemy_url(self) -> str:
        """The user/job database; a SQLite file under the data directory by default."""
        return self.database_url or f"sqlite:///{(self.data_dir / 'rag.db').resolve()}"


def _registered(name: str, names: set[str]) -> str:
    if name not in names:
        raise ValueError(f"unknown provider; expected one of {', '.join(sorted(names))}")
    return name


def _split_list(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


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
