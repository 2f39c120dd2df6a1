"""The settings that shape an answer, as one frozen model built from Settings in one place.

The answer cache hashes the whole model into its key, so changing any of these settings makes
old answers unreachable. The `RAG_*` variables stay flat in `Settings`; this model only groups
them. Every Settings field is either a field here or listed in `SETTINGS_NOT_SHAPING_ANSWERS`
(a test enforces that), so a new setting cannot be left out of the key by oversight.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from app.config import EmbeddingProvider, LLMProvider, RerankerProvider, Settings


class AnswerShape(BaseModel):
    """Everything besides the tenant, question, k and corpus that decides what an answer is."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # --- which vectors a question and the corpus get ---
    embedding_provider: EmbeddingProvider
    embedding_model: str
    embedding_query_prefix: str
    embedding_passage_prefix: str
    use_question_centring: bool
    second_embedding: str  # a second dense arm changes what is retrieved
    english_embedding: str  # English documents and questions ranked by an English model
    openai_base_url: str | None  # the server behind the openai embedder and LLM
    ollama_base_url: str
    # Chunking applies to later uploads; kept so a re-chunked corpus never meets old answers.
    chunk_size: int
    chunk_overlap: int
    section_paths: str  # which arms index a chunk's section path: it changes what is retrieved
    section_chunks: bool  # chunks cut at section starts hold other texts

    # --- retrieval: candidates, fusion, gate, exact-match caps, reranker ---
    top_k: int
    max_k: int
    dense_candidates: int
    keyword_candidates: int
    rrf_k: int
    dense_weight: float
    keyword_weight: float
    fusion: str
    score_dense_weight: float
    score_dense_spread: float
    score_keyword_spread: float
    blend_rrf_k: int
    blend_score_weight: float
    reserve_dense_first: int
    reserve_keyword_first: int
    reserve_within: int
    reserve_dense_top_within: int
    relevance_threshold: float | None
    exact_max_terms: int
    exact_max_phrases: int
    exact_max_scans: int
    exact_verify_budget: int
    keyword_coverage_power: float
    cross_script_rrf_k: int
    cross_script_dense_weight: float
    specific_evidence_max_chunks: int
    keyword_gate: bool
    keyword_pronoun_weight: float
    page_role_shift: int
    exact_scope_chunks: int  # exact or filtered approximate dense search of a scope
    reranker: RerankerProvider
    reranker_model: str
    reranker_max_candidates: int
    reranker_max_chars: int
    models_dir: Path  # where the default LLM and local reranker weights are read from

    # --- generation: model, prompt size, refusal and abstention ---
    llm_provider: LLMProvider
    llm_model: str
    llm_model_path: Path | None
    llm_max_tokens: int
    llm_context_tokens: int
    llm_max_passages: int
    llm_passage_order: str
    llm_max_context_chars: int
    llm_focus_chars: int
    llm_focus_rule: str
    refusal_text: str
    llm_abstain_threshold: float


# Settings that cannot change the answer to an accepted question, and why (grouped).
SETTINGS_NOT_SHAPING_ANSWERS = frozenset(
    {
        # service process, paths and logging
        "env",
        "host",
        "port",
        "data_dir",
        "log_level",
        # ingestion limits: they accept or refuse a file, they do not change its chunks
        "max_upload_bytes",
        "max_pages",
        "max_chars",
        "max_archive_bytes",
        "max_archive_ratio",
        "parse_timeout_s",
        "parse_max_memory_mb",
        "parse_max_cpu_s",
        # OCR changes what a document's pages hold when it is indexed; indexing invalidates
        # the tenant's cached answers, as with the other parse settings.
        "ocr_tesseract_cmd",
        "ocr_dpi",
        "ocr_max_pages",
        "ocr_max_image_pixels",
        "ocr_max_total_pixels",
        "ocr_page_timeout_s",
        "ocr_pages_per_turn",
        "quota_ocr_pages",
        # speed knobs: same model, same inputs, same greedy output
        "embedding_batch_size",
        "embedding_threads",
        "embedding_child_process",
        "reranker_batch_size",
        "llm_threads",
        "llm_timeout_s",
        "llm_prefix_cache",  # the same prompt, its fixed part evaluated once instead of per answer
        # credentials and where the store lives (the corpus is covered by its version)
        "openai_api_key",
        "vector_backend",
        "chroma_host",
        "chroma_port",
        "chroma_token",
        "database_url",
        "redis_url",
        # web app, API docs and cited-page pictures: how a cited page is shown, not the answer
        "docs_enabled",
        "page_image_max_px",
        "page_image_cache_mb",
        "page_render_timeout_s",
        "page_render_slots",
        "page_render_max_wait_s",
        "page_render_max_memory_mb",
        "page_render_max_cpu_s",
        "page_render_max_image_mp",
        "page_render_failure_ttl_s",
        # answer and stream admission: they admit, queue or refuse a question
        "answer_max_concurrent",
        "answer_max_per_tenant",
        "answer_max_per_user",
        "answer_queue_size",
        "answer_queue_per_tenant",
        "answer_queue_max_wait_s",
        "stream_max_open",
        "stream_max_per_tenant",
        "stream_max_per_user",
        # conversations: the standalone question they produce is itself in the cache key
        "conversation_max_turns",
        "conversation_context_turns",
        "conversation_rewrite",
        "conversation_rewrite_timeout_s",
        # jobs, cache, quotas
        "job_backend",
        "worker_pool_size",
        "job_heartbeat_s",
        "job_stale_after_s",
        "job_max_attempts",
        "job_retry_base_s",
        "job_timeout_s",
        "redis_key_prefix",
        "cache_backend",
        "cache_ttl_s",
        "cache_max_entries",
        "quota_documents",
        "quota_stored_bytes",
        "quota_chunks",
        "quota_queued_jobs",
        "quota_conversations_per_user",
        "quota_users",
        "max_keys_per_user",
        "quota_conversation_messages",
        "quota_conversation_bytes",
        "max_running_jobs_per_tenant",
        "ingest_batch_jobs",
        "ingest_batch_bytes",
        "hot_tenants",
        "memory_budget_mb",
        "keyword_snapshots_kept",
        # auth, abuse and HTTP limits: they admit or refuse a request
        "jwt_secret",
        "jwt_issuer",
        "jwt_audience",
        "jwt_ttl_s",
        "api_key_secret",
        "revocation_backend",
        "audit_retention_days",
        "bcrypt_rounds",
        "rate_limit_auth_per_minute",
        "rate_limit_query_per_minute",
        "rate_limit_pages_per_minute",
        "rate_limit_conversations_per_minute",
        "rate_limit_keys_per_minute",
        "rate_limit_backend",
        "max_question_chars",
        "max_page_size",
        "max_body_bytes",
        "trusted_proxies",
        "root_path",
        "login_failures_per_minute",
        "login_account_failures_per_minute",
        "login_daily_failures_per_account",
        "login_concurrency",
        "login_queue",
        # single sign-on and sealed secrets: who signs in, never what an answer says
        "secrets_key",
        "sso_allow_http",
        "sso_http_timeout_s",
        "sso_jwks_cache_s",
        # webhooks: who hears of a change, after the answer
        "webhook_allow_private",
        "webhook_retry_base_s",
        # the answer record: what is kept about an answer, after it is made
        "answer_log_days",
        # tracing
        "metrics_enabled",
        "metrics_token",
        "metrics_port",
        "metrics_host",
        "metrics_tenant_label",
        "tracing",
        "langsmith_tracing",
        "langsmith_api_key",
        "langsmith_project",
    }
)


def answer_shape(settings: Settings) -> AnswerShape:
    """The answer-shaping part of `settings` (the only place that picks those fields)."""
    return AnswerShape.model_validate(
        {name: getattr(settings, name) for name in AnswerShape.model_fields}
    )


def shape_fingerprint(shape: AnswerShape) -> str:
    """A short hash of every field of the shape, for cache keys."""
    return hashlib.sha256(shape.model_dump_json().encode("utf-8")).hexdigest()[:16]
