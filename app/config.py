"""One typed Settings object, read from `RAG_*` environment variables and `.env`.

Factories read it; leaf code receives plain values. `load_settings()` turns validation errors
into one message that names the offending environment variable.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic.config import JsonDict
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.errors import ConfigurationError
from app.limits import K_CEILING, PAGE_SIZE_CEILING, QUESTION_CHARS_CEILING, RequestLimits

ENV_PREFIX = "RAG_"
# The service's version (the API's OpenAPI version and rag_build_info{version}).
SERVICE_VERSION = "0.1.0"

# The provider names Settings accepts; the factories in app/providers build each one, and their
# `extra_llm` / `extra_embedder` add a name here for a `with` block (tests add their fakes so).
LLM_PROVIDERS: set[str] = {"llamacpp", "ollama", "openai", "extractive"}
EMBEDDING_PROVIDERS: set[str] = {"use", "e5", "huggingface", "openai", "ollama"}
RerankerProvider = Literal["none", "cross-encoder"]
VectorBackend = Literal["chroma", "chroma-http"]
CacheBackend = Literal["memory", "redis"]
JobBackend = Literal["threads", "redis"]
# Which retrieval arms index a chunk with its section path (app/ingestion/section_paths.py).
SectionPathArms = Literal["both", "keyword", "dense", "off"]
# A second dense arm beside the configured embedder's (app/services/second_arm.py).
SecondEmbedding = Literal["none", "e5"]


# The longest access token lifetime RAG_JWT_TTL_S accepts: one day (docs/api.md, "Sign-out and
# revocation").
JWT_TTL_CAP_S = 24 * 3600


class Group(NamedTuple):
    """A block of related settings: its title and what applies to all of them."""

    key: str
    title: str
    intro: str = ""


# The blocks of `.env.example` and docs/configuration.md, in order.
GROUPS: tuple[Group, ...] = (
    Group("service", "service"),
    Group("ingestion", "ingestion"),
    Group("embeddings", "embeddings"),
    Group("servers", "OpenAI-compatible and Ollama servers (only used when a provider names them)"),
    Group("web", "web app, API docs, cited page pictures"),
    Group("vector", "vector store"),
    Group("retrieval", "retrieval"),
    Group(
        "reranker",
        "reranker",
        "Weights must be present (python scripts/download_models.py); a missing model stops "
        "start-up. The quick start uses none because no weights ship offline. The Docker image "
        "chooses by itself (cross-encoder if its build could fetch the model, else none); set "
        "RAG_RERANKER only to override that.",
    ),
    Group("generation", "generation"),
    Group(
        "answers",
        'answer concurrency (per API process; docs/operations.md "Capacity and backpressure")',
        "The local model answers one question at a time, so 1 answer at once keeps every waiting "
        "answer off the threads; raise the bounds for an OpenAI-compatible or Ollama server (they "
        "also bound the spend in flight). A cache hit needs no slot. Beyond the bounds and the "
        "queue: a fast 429 (the caller's own user or tenant is at its bound) or 503 (server "
        "busy), with Retry-After.",
    ),
    Group(
        "conversations",
        "conversations and /v1/chat/completions",
        "A follow-up is rewritten into a standalone question from the latest turns before "
        "retrieval.",
    ),
    Group("storage", "storage, jobs, cache"),
    Group(
        "quotas",
        "tenant quotas and job scheduling",
        "Per-tenant quotas, shown with their usage by GET /stats. Going over one refuses the "
        "upload or conversation with 413 `quota_exceeded` (the message names the quota) and "
        "stores nothing.",
    ),
    Group("auth", "auth and abuse limits"),
    Group("http", "HTTP limits and proxies"),
    Group(
        "metrics",
        "metrics and traces",
        "Off unless configured; docs/monitoring.md. /metrics is protected by a bearer token on "
        "the API's port, or served only on a port of its own that the gateway does not publish. "
        "Several processes (uvicorn --workers, rq workers) share PROMETHEUS_MULTIPROC_DIR, "
        "emptied before they start, so one scrape sees them all.",
    ),
    Group("tracing", "tracing (nothing is sent anywhere unless turned on)"),
)


def setting(
    default: Any, *, group: str, description: str, unit: str = "", **constraints: Any
) -> Any:
    """A Settings field with its one description, its unit and its block (`GROUPS`).

    `.env.example` and docs/configuration.md are generated from these (app/settings_docs.py).
    """
    extra: JsonDict = {"group": group, "unit": unit}
    return Field(default, description=description, json_schema_extra=extra, **constraints)


class Settings(BaseSettings):
    """Every setting of the service, each with its description, unit and group."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    # --- service ---
    env: Literal["development", "production"] = setting(
        "production",
        group="service",
        description="development: a random per-process JWT secret is allowed (with a warning). "
        "`make run` sets it.",
    )
    host: str = setting("127.0.0.1", group="service", description="Address the API listens on.")
    port: int = setting(
        8000, group="service", description="Port the API listens on.", ge=1, le=65535
    )
    data_dir: Path = setting(
        Path("data"),
        group="service",
        description="All state (SQLite, Chroma, uploads, keyword indexes) lives here.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = setting(
        "INFO", group="service", description="Lowest level of the JSON log lines written."
    )

    # --- ingestion ---
    chunk_size: int = setting(
        1000, group="ingestion", unit="characters", description="Characters per chunk.", gt=0
    )
    chunk_overlap: int = setting(
        150,
        group="ingestion",
        unit="characters",
        description="Characters neighbouring chunks share (must be < RAG_CHUNK_SIZE).",
        ge=0,
    )
    section_paths: SectionPathArms = setting(
        "off",
        group="ingestion",
        description="Index each chunk with the path of headings above it (chapter › section › "
        "subsection, from the PDF outline, DOCX heading styles or Markdown headings) in both arms, "
        "the keyword arm, the dense arm, or off. Off by default: no choice won on every manual's "
        "test part (docs/evaluation.md). Whatever the value, every chunk records its path, shown "
        "as the `section` breadcrumb of /search hits (never in the passage text). Changing it "
        "applies to documents ingested afterwards: re-ingest older ones.",
    )
    section_chunks: bool = setting(
        False,
        group="ingestion",
        description="Start a new chunk at every section start (PDF bookmark, DOCX heading, "
        "Markdown heading), so no chunk straddles two sections. Off by default: on the manuals "
        "it lost on gnuplot's test part (default MRR@10 0.475 -> 0.376) while it gained on "
        "R-exts' (0.600 -> 0.660; eval/README.md). Applies to documents ingested afterwards.",
    )
    max_upload_bytes: int = setting(
        50 * 1024 * 1024,
        group="ingestion",
        unit="bytes",
        description="Upload limit (413 above it, enforced while the body is read).",
        gt=0,
    )
    max_pages: int = setting(
        2000, group="ingestion", unit="pages", description="Page cap per document.", gt=0
    )
    max_chars: int = setting(
        5_000_000,
        group="ingestion",
        unit="characters",
        description="Extracted-character cap per document.",
        gt=0,
    )
    max_archive_bytes: int = setting(
        200 * 1024 * 1024,
        group="ingestion",
        unit="bytes",
        description="DOCX/PPTX/XLSX: total uncompressed bytes above which a file is a zip bomb.",
        gt=0,
    )
    max_archive_ratio: float = setting(
        100.0,
        group="ingestion",
        description="DOCX/PPTX/XLSX: compression ratio above which a file is a zip bomb.",
        gt=1,
    )
    parse_timeout_s: float = setting(
        120.0,
        group="ingestion",
        unit="s",
        description="Time limit for parsing one untrusted file (runs in a child process).",
        gt=0,
    )
    parse_max_memory_mb: int = setting(
        2048,
        group="ingestion",
        unit="MB",
        description="Memory (address space, RLIMIT_AS) of the parse child; a file that needs more "
        "fails its job with `document_too_complex`.",
        ge=64,
    )
    parse_max_cpu_s: int = setting(
        120,
        group="ingestion",
        unit="s",
        description="CPU seconds of the parse child; a file that needs more fails its job with "
        "`document_too_complex`.",
        gt=0,
    )
    ocr_tesseract_cmd: str = setting(
        "tesseract",
        group="ingestion",
        description="The Tesseract program scanned pages and images are read with (a name on PATH "
        "or a path); without it /ready shows `features.ocr: unavailable` and scans are refused "
        'with "install tesseract-ocr".',
    )
    ocr_dpi: int = setting(
        200,
        group="ingestion",
        unit="dpi",
        description="Resolution scanned PDF pages are OCR'd at (measured: 200 reads as well as "
        "300, in English and Arabic, from 8 pt text up, and takes a third less time).",
        ge=72,
        le=600,
    )
    ocr_max_pages: int = setting(
        200,
        group="ingestion",
        unit="pages",
        description="Pages (or image frames) OCR'd per document at most, checked before decoding.",
        gt=0,
    )
    ocr_max_image_pixels: int = setting(
        60_000_000,
        group="ingestion",
        unit="pixels",
        description="Pixels of one image or page picture to OCR, read from the header before "
        "decoding (an image bomb is refused).",
        gt=0,
    )
    ocr_max_total_pixels: int = setting(
        2_000_000_000,
        group="ingestion",
        unit="pixels",
        description="Pixels of all the frames of one image upload together, read from the header "
        "before decoding (the default lets RAG_OCR_MAX_PAGES A4 pages scanned at 300 dpi "
        "through); an image over it fails its job with `document_too_large`.",
        gt=0,
    )
    ocr_page_timeout_s: float = setting(
        60.0,
        group="ingestion",
        unit="s",
        description="Wall time per OCR'd page; a page over it is listed in the job's `warnings` "
        "and the others are kept.",
        gt=0,
    )
    ocr_pages_per_turn: int = setting(
        10,
        group="ingestion",
        unit="pages",
        description="A scan OCRs this many pages per turn: after each turn, if another tenant's "
        "job is waiting, the job goes back to the queue behind it and later resumes from the "
        "pages already read (kept beside the upload), so a long scan does not hold a worker "
        "while other tenants' small uploads wait. 0 = never yield.",
        ge=0,
    )

    # --- embeddings ---
    embedding_provider: str = setting(
        "use",
        group="embeddings",
        description="use (USE-multilingual, ships in a package) | e5 (multilingual-e5-small, "
        "ships) | huggingface (sentence-transformers name or local path) | openai | ollama.",
    )
    embedding_model: str = setting(
        "",
        group="embeddings",
        description="Model name for huggingface / openai / ollama (required for openai and "
        "ollama).",
    )
    embedding_query_prefix: str = setting(
        "",
        group="embeddings",
        description='Prefix for e5-style models on the huggingface provider, e.g. "query: ".',
    )
    embedding_passage_prefix: str = setting(
        "",
        group="embeddings",
        description='Prefix for e5-style models on the huggingface provider, e.g. "passage: ".',
    )
    use_question_centring: bool = setting(
        False,
        group="embeddings",
        description="use provider only: subtract 0.75 x the mean XQuAD question from each "
        "question vector. Gains on Wikipedia-like text, loses on hadith and Qur'an "
        "(docs/evaluation.md), so opt-in; no reindex either way.",
    )
    second_embedding: SecondEmbedding = setting(
        "none",
        group="embeddings",
        description="none | e5: a second dense arm (multilingual-e5-small, ships) fused with "
        "the first by RRF. Wins on XQuAD ar->en and en->ar and on ARCD, loses on hadith and "
        "Qur'an ar->en, embeds passages ~50x and questions ~12x slower than USE "
        "(docs/evaluation.md), so opt-in. A tenant indexed without it is searched without it "
        "until `python -m app.cli reindex --tenant T`.",
    )
    embedding_batch_size: int = setting(
        32, group="embeddings", unit="texts", description="Texts embedded per call.", gt=0
    )
    embedding_threads: int = setting(
        1,
        group="embeddings",
        unit="threads",
        description="BLAS threads per embedding call: 1 keeps concurrent queries fast (measured "
        "in bench/README.md).",
        gt=0,
    )
    embedding_child_process: bool = setting(
        True,
        group="embeddings",
        description="Local models (use, e5) embed passages (uploads, reindex) in a child process "
        "with its own GIL, so an upload's embedding and the requests this process serves do not "
        "slow each other down; questions are embedded in process. Costs the child's memory "
        "(measured in bench/README.md).",
    )

    # --- OpenAI-compatible and Ollama servers ---
    openai_base_url: str | None = setting(
        None, group="servers", description="Base URL of an OpenAI-compatible server."
    )
    openai_api_key: str | None = setting(
        None,
        group="servers",
        description="API key of that server (any non-empty text if it has none).",
        repr=False,
    )
    ollama_base_url: str = setting(
        "http://127.0.0.1:11434", group="servers", description="Base URL of an Ollama server."
    )

    # --- web app, API docs, cited page images ---
    docs_enabled: bool | None = setting(
        None,
        group="web",
        description="/docs and /redoc (served from installed assets, no CDN). Unset: on when "
        "RAG_ENV=development, off in production. true/false forces them on or off (off: both "
        "answer 404).",
    )
    page_image_max_px: int = setting(
        1600,
        group="web",
        unit="pixels",
        description="Longest side of a rendered PDF page (GET /documents/{id}/pages/{n}.png).",
        ge=200,
        le=4000,
    )
    page_image_cache_mb: int = setting(
        64,
        group="web",
        unit="MB",
        description="Rendered pages kept in memory per API process (0 disables the cache).",
        ge=0,
    )
    page_render_timeout_s: float = setting(
        20.0,
        group="web",
        unit="s",
        description="Each page is rendered in a child process, stopped after this long (a hostile "
        "PDF; 409).",
        gt=0,
    )
    page_render_slots: int = setting(
        2,
        group="web",
        unit="renders",
        description="Renders at once per API process, on threads of their own.",
        ge=1,
        le=64,
    )
    page_render_max_wait_s: float = setting(
        1.5,
        group="web",
        unit="s",
        description="A request waits at most this long for a render slot, then gets 429 (its own "
        "user or tenant holds every slot) or 503 (the server is busy), with Retry-After.",
        ge=0,
        le=30,
    )
    page_render_max_memory_mb: int = setting(
        1024,
        group="web",
        unit="MB",
        description="Address space (RLIMIT_AS) of the render child, like the parse child's.",
        ge=128,
    )
    page_render_max_cpu_s: int = setting(
        30,
        group="web",
        unit="s",
        description="CPU seconds (RLIMIT_CPU) of the render child.",
        gt=0,
    )
    page_render_max_image_mp: int = setting(
        64,
        group="web",
        unit="megapixels",
        description="A page whose embedded images hold more than this is refused (409), undecoded.",
        gt=0,
    )
    page_render_failure_ttl_s: float = setting(
        600.0,
        group="web",
        unit="s",
        description="A page that failed or timed out answers the same 409 at once for this long "
        "(per file version).",
        ge=0,
    )

    # --- vector store ---
    vector_backend: VectorBackend = setting(
        "chroma",
        group="vector",
        description="chroma: embedded persistent directory (one process owns it) | chroma-http: "
        "a Chroma server.",
    )
    chroma_host: str = setting("127.0.0.1", group="vector", description="Chroma server host.")
    chroma_port: int = setting(
        8001, group="vector", description="Chroma server port.", ge=1, le=65535
    )
    chroma_token: str = setting(
        "",
        group="vector",
        description="Token for a Chroma server started with token authentication (sent as a "
        "Bearer token).",
        repr=False,
    )

    # --- retrieval ---
    top_k: int = setting(
        5, group="retrieval", unit="results", description="Results returned by default.", gt=0
    )
    max_k: int = setting(
        50,
        group="retrieval",
        unit="results",
        description=f"Largest k a client may ask for (at most {K_CEILING}).",
        gt=0,
        le=K_CEILING,
    )
    dense_candidates: int = setting(
        30,
        group="retrieval",
        unit="chunks",
        description="Candidates taken from the dense arm before Reciprocal Rank Fusion.",
        gt=0,
    )
    keyword_candidates: int = setting(
        30,
        group="retrieval",
        unit="chunks",
        description="Candidates taken from the keyword (BM25) arm before Reciprocal Rank Fusion.",
        gt=0,
    )
    rrf_k: int = setting(
        5,
        group="retrieval",
        description="The fusion's RRF constant (tuned on the eval data: 5 beat 60 on every set).",
        gt=0,
    )
    dense_weight: float = setting(
        0.3,
        group="retrieval",
        description="The dense arm's fusion weight (0.3 won held out: eval/tune_fusion.py, tuned "
        "on ARCD train + XQuAD dev, issue 16).",
        ge=0,
    )
    keyword_weight: float = setting(
        1.0, group="retrieval", description="The keyword arm's fusion weight.", ge=0
    )
    keyword_coverage_power: float = setting(
        1.0,
        group="retrieval",
        description="The keyword arm's weight is multiplied by coverage ** power (coverage: "
        "share of the query's terms found in the tenant's text), so cross-language questions "
        "rely on the dense arm; 0 switches the scaling off.",
        ge=0,
    )
    cross_script_rrf_k: int = setting(
        0,
        group="retrieval",
        description="A query mostly in a script the tenant's text lacks (an Arabic question over "
        "English documents) is fused with this RRF k, the keyword arm unscaled (0: same as other "
        "queries).",
        ge=0,
    )
    cross_script_dense_weight: float = setting(
        1.0,
        group="retrieval",
        description="The dense weight for such cross-script queries (when RAG_CROSS_SCRIPT_RRF_K "
        "is set).",
        ge=0,
    )
    specific_evidence_max_chunks: int = setting(
        2,
        group="retrieval",
        unit="chunks",
        description="When at most this many chunks hold all of a query's numbers and words in "
        "another script than the query's (a year or a Latin name in an Arabic question), the "
        "keyword arm weighs at least as much as the dense arm whatever the coverage (0: off).",
        ge=0,
    )
    keyword_gate: bool = setting(
        True,
        group="retrieval",
        description="Rank by the dense arm alone a query that matched no content word of the "
        "tenant's text in its own script and no number, counting none that more than half of "
        "the tenant's chunks hold, nor, in a script the tenant's text only borrows, one more "
        "than RAG_SPECIFIC_EVIDENCE_MAX_CHUNKS chunks hold (only function words, other-script "
        "words like the Arabic 'ﷺ' expands to, near-ubiquitous words, or nothing), unless "
        "RAG_SPECIFIC_EVIDENCE_MAX_CHUNKS applies (docs/evaluation.md).",
    )
    page_role_shift: int = setting(
        10,
        group="retrieval",
        unit="places",
        description="Places a contents, index, list-of-figures, bibliography, blank or cover page "
        "yields to content pages in the ranking (0: no demotion; such pages are never dropped).",
        ge=0,
    )
    relevance_threshold: float | None = setting(
        None,
        group="retrieval",
        description="Minimum dense similarity for a passage to count as relevant; empty = "
        "calibrated per model.",
    )

    # --- reranker ---
    reranker: RerankerProvider = setting(
        "none", group="reranker", description="none | cross-encoder."
    )
    reranker_model: str = setting(
        "cross-encoder/mmarco-mMiniLMv2-L12-H384-v1",
        group="reranker",
        description="The cross-encoder's model name.",
    )
    reranker_max_candidates: int = setting(
        20, group="reranker", unit="chunks", description="Fused candidates reranked.", gt=0
    )
    reranker_max_chars: int = setting(
        1200,
        group="reranker",
        unit="characters",
        description="Characters of each candidate the cross-encoder reads.",
        gt=0,
    )
    reranker_batch_size: int = setting(
        16, group="reranker", unit="pairs", description="Pairs scored per call.", gt=0
    )

    # --- generation ---
    llm_provider: str = setting(
        "llamacpp",
        group="generation",
        description="llamacpp (in-process GGUF, default) | ollama | openai (any OpenAI-compatible "
        "server) | extractive (no LLM: best supporting sentences, cited).",
    )
    llm_model: str = setting(
        "", group="generation", description="Model name for ollama / openai (required there)."
    )
    llm_model_path: Path | None = setting(
        None,
        group="generation",
        description="A GGUF file for llamacpp; empty = Qwen2.5-Coder-1.5B-Instruct Q4_K_M "
        "assembled and verified.",
    )
    llm_max_tokens: int = setting(
        256, group="generation", unit="tokens", description="Longest answer.", gt=0
    )
    llm_context_tokens: int = setting(
        4096,
        group="generation",
        unit="tokens",
        description="The model's context; a question that does not fit with its passages is a "
        "422 `prompt_too_long`.",
        gt=0,
    )
    llm_threads: int = setting(
        2, group="generation", unit="threads", description="llama.cpp compute threads.", gt=0
    )
    llm_timeout_s: float = setting(
        120.0, group="generation", unit="s", description="Deadline of a whole answer.", gt=0
    )
    llm_prefix_cache: bool = setting(
        True,
        group="generation",
        description="llamacpp: evaluate the prompt's fixed rules and worked examples once per "
        "process and restore that state before every answer (nothing of an earlier answer is "
        "reused); false = llama.cpp's own reuse of whatever prefix the last prompt shared.",
    )
    llm_max_passages: int = setting(
        3, group="generation", unit="passages", description="Passages shown to the LLM.", gt=0
    )
    llm_passage_order: Literal["best_first", "best_last"] = setting(
        "best_last",
        group="generation",
        description="Order of the passages in the prompt: best_last puts the best-ranked one "
        "next to the question. The local model cites the passage it read last most often; "
        "with the abstain threshold 0.05 it cites a gold page in 0.45 of the natural manual "
        "questions against 0.28 best_first (docs/evaluation.md).",
    )
    llm_max_context_chars: int = setting(
        3000,
        group="generation",
        unit="characters",
        description="Passage characters in the prompt in all (prompt size is the latency lever).",
        gt=0,
    )
    llm_focus_chars: int = setting(
        700,
        group="generation",
        unit="characters",
        description="Passages are cut to the question's best sentences, this many characters in "
        "all; 0 shows whole passages (about twice the prompt to read before the first token).",
        ge=0,
    )
    models_dir: Path = setting(
        Path("models"),
        group="generation",
        description="Where model files are assembled or downloaded.",
    )
    refusal_text: str = setting(
        "I could not find the answer in the provided documents.",
        group="generation",
        description="The exact sentence the model must answer with when the passages do not "
        "contain the answer.",
    )
    llm_abstain_threshold: float = setting(
        0.05,
        group="generation",
        unit="probability",
        description="Local model only: refuse when its probability of starting the refusal "
        "sentence is at least this (1 = only when it actually refuses). Chosen with "
        "RAG_LLM_PASSAGE_ORDER=best_last on XQuAD, ARCD and the natural manual questions "
        "(`python -m eval.answers`, docs/evaluation.md): 0.05 refuses 7% of answerable manual "
        "questions where 0.02 refused 38%, at the cost of some refusals of unanswerable ones.",
        ge=0,
        le=1,
    )

    # --- answer concurrency (per API process) ---
    answer_max_concurrent: int = setting(
        1,
        group="answers",
        unit="answers",
        description="Answers generating at once, in total (the one local model: 1).",
        gt=0,
    )
    answer_max_per_tenant: int = setting(
        1,
        group="answers",
        unit="answers",
        description="Answers generating at once per tenant.",
        gt=0,
    )
    answer_max_per_user: int = setting(
        1, group="answers", unit="answers", description="Answers generating at once per user.", gt=0
    )
    answer_queue_size: int = setting(
        8,
        group="answers",
        unit="answers",
        description="Answers that may wait for a slot, in total.",
        ge=0,
    )
    answer_queue_per_tenant: int = setting(
        4,
        group="answers",
        unit="answers",
        description="Answers that may wait for a slot, per tenant.",
        ge=0,
    )
    answer_queue_max_wait_s: float = setting(
        30.0, group="answers", unit="s", description="Longest wait for a slot.", ge=0
    )
    stream_max_open: int = setting(
        32,
        group="answers",
        unit="streams",
        description="Open /query/stream responses in total; beyond them 429/503 at once.",
        gt=0,
    )
    stream_max_per_tenant: int = setting(
        8,
        group="answers",
        unit="streams",
        description="Open /query/stream responses per tenant.",
        gt=0,
    )
    stream_max_per_user: int = setting(
        4,
        group="answers",
        unit="streams",
        description="Open /query/stream responses per user.",
        gt=0,
    )

    # --- conversations and /v1/chat/completions ---
    conversation_max_turns: int = setting(
        20,
        group="conversations",
        unit="turns",
        description="Question/answer turns a conversation keeps (POST /conversations/{id}/"
        "messages); older ones are dropped.",
        gt=0,
    )
    conversation_context_turns: int = setting(
        3,
        group="conversations",
        unit="turns",
        description="Latest turns a follow-up is rewritten from.",
        gt=0,
    )
    conversation_rewrite: Literal["llm", "fallback"] = setting(
        "llm",
        group="conversations",
        description="llm (the answer model; the fallback, previous question + follow-up, when it "
        "fails, is too slow or says nothing usable) or fallback (never the LLM).",
    )
    conversation_rewrite_timeout_s: float = setting(
        20.0,
        group="conversations",
        unit="s",
        description="LLM rewrite budget before the fallback is used.",
        gt=0,
    )

    # --- storage, jobs, cache ---
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

    # --- tenant quotas and job scheduling ---
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

    # --- auth and abuse limits ---
    jwt_secret: str = setting(
        "",
        group="auth",
        description="HS256 key, at least 32 bytes; required unless RAG_ENV=development. Generate "
        'one with: python -c "import secrets; print(secrets.token_urlsafe(48))"',
        repr=False,
    )
    jwt_issuer: str = setting("rag-service", group="auth", description="Issuer of the tokens.")
    jwt_audience: str = setting("rag-api", group="auth", description="Audience of the tokens.")
    jwt_ttl_s: int = setting(
        3600,
        group="auth",
        unit="s",
        description="Access token lifetime, at most 86400 (one day): a leaked token works until "
        "it expires unless it is signed out (POST /auth/logout), so the window is bounded. A "
        "token whose exp - iat exceeds it (by more than 60 s) is refused, so lowering it also "
        "ends longer tokens already issued.",
        gt=0,
        le=JWT_TTL_CAP_S,
    )
    api_key_secret: str = setting(
        "",
        group="auth",
        description="Server secret API keys are stored under (HMAC-SHA256). Empty: derived from "
        "RAG_JWT_SECRET, so rotating that secret also invalidates every API key; set this to "
        "rotate them separately.",
        repr=False,
    )
    secrets_key: str = setting(
        "",
        group="auth",
        description="Fernet key (32 bytes, URL-safe base64) that encrypts the secrets tenants "
        "store, such as their identity provider's client secret. Required to configure single "
        "sign-on in production; in development one is generated into RAG_DATA_DIR/secrets.key. "
        'Generate one with: python -c "from cryptography.fernet import Fernet; '
        'print(Fernet.generate_key().decode())"',
        repr=False,
    )
    sso_allow_http: bool = setting(
        False,
        group="auth",
        description="Accept an identity provider whose issuer is an http:// URL (tests and local "
        "providers only: tokens and the client secret would cross the network in clear).",
    )
    sso_http_timeout_s: float = setting(
        5.0,
        group="auth",
        unit="s",
        description="How long a call to an identity provider (discovery, code exchange, keys) "
        "may take before the sign-in fails with 503.",
        gt=0,
        le=60,
    )
    sso_jwks_cache_s: int = setting(
        3600,
        group="auth",
        unit="s",
        description="How long an identity provider's signing keys are trusted after they were "
        "fetched: while the provider is down, known keys keep working this long and unknown "
        "ones are refused. An unknown key id refetches the keys, at most once a minute per "
        "issuer.",
        ge=60,
        le=86400,
    )
    revocation_backend: Literal["database", "redis"] = setting(
        "database",
        group="auth",
        description="Where signed-out tokens are kept until they expire: database or redis "
        "(RAG_REDIS_URL).",
    )
    audit_retention_days: int = setting(
        365,
        group="auth",
        unit="days",
        description="Audit log entries (logins, keys, users, uploads, deletions) older than this "
        "are deleted.",
        ge=1,
        le=36500,
    )
    bcrypt_rounds: int = setting(
        12, group="auth", unit="log2 rounds", description="bcrypt cost (12..16).", ge=12, le=16
    )
    rate_limit_auth_per_minute: int = setting(
        10,
        group="auth",
        unit="per minute",
        description="Logins per client IP on /auth/token.",
        gt=0,
    )
    rate_limit_query_per_minute: int = setting(
        120,
        group="auth",
        unit="per minute",
        description="Requests per user on /query and /search.",
        gt=0,
    )
    rate_limit_pages_per_minute: int = setting(
        120,
        group="auth",
        unit="per minute",
        description="Requests per user on the cited-page routes (/documents/{id}/pages/...).",
        gt=0,
    )
    rate_limit_conversations_per_minute: int = setting(
        30,
        group="auth",
        unit="per minute",
        description="Conversations one user may start (POST /conversations); over it, 429 with "
        "Retry-After.",
        gt=0,
    )
    rate_limit_keys_per_minute: int = setting(
        10,
        group="auth",
        unit="per minute",
        description="API keys one user may make (POST /auth/keys); over it, 429 with Retry-After.",
        gt=0,
    )
    rate_limit_backend: CacheBackend = setting(
        "memory",
        group="auth",
        description="Rate limits: memory | redis (shared by every API process).",
    )
    max_question_chars: int = setting(
        2000,
        group="auth",
        unit="characters",
        description=f"Longest question or search query (at most {QUESTION_CHARS_CEILING}; "
        "app/limits.py).",
        gt=0,
        le=QUESTION_CHARS_CEILING,
    )
    max_page_size: int = setting(
        100,
        group="auth",
        unit="items",
        description=f"Largest page a document, job or conversation listing returns (at most "
        f"{PAGE_SIZE_CEILING}).",
        gt=0,
        le=PAGE_SIZE_CEILING,
    )

    # --- HTTP limits and proxies ---
    max_body_bytes: int = setting(
        64 * 1024,
        group="http",
        unit="bytes",
        description="Largest JSON or form body (every route but POST /documents, which is capped "
        "at RAG_MAX_UPLOAD_BYTES plus 64 KiB of multipart framing). Enforced before "
        "authentication, on Content-Length and on chunked bodies as they arrive: larger bodies "
        "get 413.",
        ge=4096,
    )
    trusted_proxies: str = setting(
        "",
        group="http",
        description="Reverse proxies whose X-Forwarded-For / -Proto / -Prefix headers are "
        "believed, as a comma separated list of IPs or CIDRs, e.g. 10.0.0.0/8,127.0.0.1 (empty: "
        "the headers are ignored, the peer is the client).",
    )
    root_path: str = setting(
        "",
        group="http",
        description="Path prefix a gateway serves the API under (e.g. /rag); a trusted proxy's "
        "X-Forwarded-Prefix overrides it per request. Used for the OpenAPI servers URL, /docs "
        "and redirects.",
    )
    login_failures_per_minute: int = setting(
        5,
        group="http",
        unit="per minute",
        description="Wrong passwords for one user name from one client IP (the IP's own budget "
        "is RAG_RATE_LIMIT_AUTH_PER_MINUTE attempts); only failures count and a success clears "
        "them, so nobody can lock a user out from another client.",
        gt=0,
    )
    login_account_failures_per_minute: int = setting(
        20,
        group="http",
        unit="per minute",
        description="Wrong passwords for one account (a tenant's user name) from all clients "
        "together (an IPv6 client is its /64). Beyond it, clients that never logged in to that "
        "account get one password check per 1 s (2 s from twice as many failures, 4 s from "
        "four times, never slower) and 429 with Retry-After in between; the account's known "
        "clients are not slowed, so nobody can lock a user out this way either.",
        gt=0,
    )
    login_daily_failures_per_account: int = setting(
        100,
        group="http",
        unit="per 24 hours",
        description="Wrong passwords for one account (a tenant's user name) in 24 hours, from "
        "all clients together, after which clients that have not signed in to it in the last "
        "30 days are refused with 429 `account_locked` until the 24 hours from its first "
        "failure end (no password check); its own recent clients still sign in. Each lock is "
        "written once to the audit log (`login.locked`).",
        gt=0,
    )
    login_concurrency: int = setting(
        2,
        group="http",
        unit="checks",
        description="Password checks (bcrypt) running at once.",
        gt=0,
    )
    login_queue: int = setting(
        8,
        group="http",
        unit="logins",
        description="Logins that may wait about a second for a check; beyond that a login gets "
        "429 with Retry-After at once.",
        ge=0,
    )
    exact_max_terms: int = setting(
        16,
        group="http",
        unit="terms",
        description="Exact-match work per query: literal terms and quoted phrases looked up.",
        gt=0,
    )
    exact_max_phrases: int = setting(
        4, group="http", unit="phrases", description="Quoted phrases looked up per query.", gt=0
    )
    exact_max_scans: int = setting(
        4,
        group="http",
        unit="scans",
        description="Substring scans of the tenant's chunk texts per query.",
        ge=0,
    )
    exact_verify_budget: int = setting(
        400,
        group="http",
        unit="chunks",
        description="Chunk texts fetched to verify multi-word phrases, per query.",
        ge=0,
    )

    # --- metrics and traces ---
    metrics_enabled: bool = setting(
        False,
        group="metrics",
        description="Serve /metrics in the Prometheus text format; needs RAG_METRICS_TOKEN or "
        "RAG_METRICS_PORT.",
    )
    metrics_token: str = setting(
        "",
        group="metrics",
        description="Bearer token scrapers send for /metrics on the API's port.",
        repr=False,
    )
    metrics_port: int | None = setting(
        None,
        group="metrics",
        description="Serve /metrics only on this port of its own (the API's /metrics then "
        "answers 404); keep it off the gateway.",
        ge=1,
        le=65535,
    )
    metrics_host: str | None = setting(
        None,
        group="metrics",
        description="Address the RAG_METRICS_PORT listener binds (empty: RAG_HOST's); it has no "
        "token, so widen it (0.0.0.0) only on a private network such as the compose stack's.",
    )
    metrics_tenant_label: str = setting(
        "",
        group="metrics",
        description="Comma-separated tenants whose answers get a `tenant` label of their own (the "
        'rest count as "other"); no tenant is a label by default.',
    )
    tracing: Literal["off", "otlp"] = setting(
        "off",
        group="metrics",
        description="OpenTelemetry traces: otlp exports spans (also on when "
        "OTEL_EXPORTER_OTLP_ENDPOINT is set).",
    )

    # --- tracing ---
    langsmith_tracing: bool = setting(
        False, group="tracing", description="Send traces to LangSmith."
    )
    langsmith_api_key: str | None = setting(
        None, group="tracing", description="LangSmith API key.", repr=False
    )
    langsmith_project: str = setting(
        "rag-service", group="tracing", description="LangSmith project name."
    )

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
        if self.metrics_enabled and not (self.metrics_token or self.metrics_port):
            raise ValueError(
                f"{ENV_PREFIX}METRICS_ENABLED needs {ENV_PREFIX}METRICS_TOKEN (a bearer token "
                f"for /metrics) or {ENV_PREFIX}METRICS_PORT (a port of its own, not published)"
            )
        if self.job_backend == "redis" and self.vector_backend == "chroma":
            raise ValueError(
                f"{ENV_PREFIX}JOB_BACKEND=redis runs ingestion in separate worker processes, "
                "which cannot share an embedded Chroma directory; set "
                f"{ENV_PREFIX}VECTOR_BACKEND=chroma-http"
            )
        return self

    @property
    def request_limits(self) -> RequestLimits:
        """The configured caps of search, question and listing requests."""
        return RequestLimits(
            max_question_chars=self.max_question_chars,
            max_k=self.max_k,
            default_k=self.top_k,
            max_page_size=self.max_page_size,
        )

    def section_paths_in(self, arm: Literal["keyword", "dense"]) -> bool:
        """Whether this retrieval arm indexes chunks with their section path."""
        return self.section_paths in ("both", arm)

    @property
    def trusted_proxy_list(self) -> list[str]:
        """RAG_TRUSTED_PROXIES as a list of IPs and CIDR networks."""
        return _split_list(self.trusted_proxies)

    @property
    def metrics_tenants(self) -> frozenset[str]:
        """RAG_METRICS_TENANT_LABEL as the set of tenants broken out by name."""
        return frozenset(_split_list(self.metrics_tenant_label))

    @property
    def metrics_bind_host(self) -> str:
        """The address RAG_METRICS_PORT's listener binds: RAG_METRICS_HOST, else RAG_HOST."""
        return self.metrics_host or self.host

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
