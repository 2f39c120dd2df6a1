"""Request and response bodies of the public API (the contract clients code against)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from app.api.collection_schemas import ScopeFields
from app.api.records import IsoTime, Record
from app.errors import public_job_error
from app.generation.citations import Citation
from app.request_limits import K_CEILING, QUESTION_CHARS_CEILING
from app.retrieval.grouping import Grouping

JobStatus = Literal["queued", "processing", "done", "failed"]
JobKind = Literal["index", "collection_delete", "evaluation_run"]


class TokenOut(BaseModel):
    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int


class JobAccepted(BaseModel):
    job_id: str
    document_id: str
    status: JobStatus
    source: str


class UploadAccepted(JobAccepted):
    """The first file's job at the top level (the single-file shape), and every file's in `jobs`."""

    jobs: list[JobAccepted]


class UploadUnchanged(BaseModel):
    """An upload whose content the document already has indexed: nothing was queued."""

    status: Literal["unchanged"] = "unchanged"
    document_id: str
    source: str


class Progress(Record):
    done: int
    total: int
    stage: str


class JobOut(Record):
    job_id: str
    kind: JobKind = Field(
        default="index",
        description="`index`: an upload's indexing (its document_id and source); "
        "`collection_delete`: a collection's deletion (collection_id; source is its name, "
        "progress counts documents, document_id is empty); `evaluation_run`: an evaluation "
        "run (its job_id is the run_id; source is its set's name, progress counts items)",
    )
    document_id: str
    collection_id: str | None = Field(
        default=None, description="the collection a `collection_delete` job deletes"
    )
    status: JobStatus
    source: str
    progress: Progress
    chunks_indexed: int
    pages: int
    error_code: str | None = Field(
        default=None, description="stable code of the failure (or `retrying`), else null"
    )
    error: str | None
    warnings: list[str] = Field(
        default_factory=list,
        description="what a done job could not do, e.g. scanned pages OCR could not read",
    )
    created_at: IsoTime
    updated_at: IsoTime

    @field_validator("error")
    @classmethod
    def _public_error(cls, detail: str | None, info: ValidationInfo) -> str | None:
        # The stored detail is for operators; clients get a safe text.
        code = info.data.get("error_code")
        return None if code is None else public_job_error(code, detail or "")


class DocumentOut(Record):
    document_id: str
    source: str
    status: str
    pages: int
    chunks: int
    size_bytes: int
    uploaded_at: IsoTime
    uploaded_by: str | None = Field(
        default=None, description="user id of whoever uploaded this version (null: before roles)"
    )
    uploaded_by_name: str | None = Field(
        default=None, description="that user's name (null once the user is deleted)"
    )
    content_sha256: str | None = Field(
        default=None, description="hex SHA-256 of the uploaded file of this version"
    )
    sync_root: str | None = Field(
        default=None, description="the label of the synced folder it came from (null: none)"
    )
    collection_id: str = Field(default="general", description="the collection it belongs to")
    collection: str = Field(
        default="general", validate_default=True, description="that collection's name"
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="its own metadata fields")
    language: str | None = Field(
        default=None,
        description="the language detected in its text (ISO 639-1: ar, en, de, fr, es, it, nl, "
        "pt; null: not told, or indexed before languages were detected)",
    )

    @field_validator("collection")
    @classmethod
    def _collection_name(cls, name: str, info: ValidationInfo) -> str:
        # A record holds its collection's id; the names the caller sees come in the context
        # (`model_validate(record, context={"collection_names": ...})`).
        names = (info.context or {}).get("collection_names")
        if names is None:
            return name
        collection_id = info.data.get("collection_id", "general")
        return str(names.get(collection_id, collection_id))


# The fields of DocumentOut, which `GET /documents?fields=` may choose.
DocumentField = Literal[
    "document_id",
    "source",
    "status",
    "pages",
    "chunks",
    "size_bytes",
    "uploaded_at",
    "uploaded_by",
    "uploaded_by_name",
    "content_sha256",
    "sync_root",
    "collection_id",
    "collection",
    "metadata",
]


class SearchIn(ScopeFields):
    model_config = ConfigDict(extra="forbid")

    # The outer bounds; the configured caps are checked by RequestLimits (both in
    # app.request_limits).
    query: str = Field(min_length=1, max_length=QUESTION_CHARS_CEILING)
    k: int | None = Field(default=None, ge=1, le=K_CEILING)
    group: Grouping = Field(
        default="chunk",
        description="`chunk`: the k best passages, several may come from one document. "
        "`document`: the k best documents, each as its best passage, with `other_chunks` and "
        "`other_pages` saying what else of it ranked (docs/api.md, Search by document).",
    )
    explain: bool = Field(
        default=False,
        description="the retrieval test bench: each result's keyword and dense rank and score, "
        "fused rank, the rules that moved it and the matched terms; the fusion's weights and the "
        "relevance gate's values in `explain` (docs/api.md, Explain a search).",
    )


class SearchResultOut(BaseModel):
    rank: int
    chunk_id: str = Field(
        description="the passage; pass it as `chunk` to GET /documents/{id}/pages/{page}.png "
        "(or .../{page}/text) to see it highlighted on its page"
    )
    document_id: str
    source: str
    page: int
    page_label: str
    # contents / index / figures / bibliography / blank / cover; null for a content page.
    page_role: str | None = None
    # The headings the passage sits under ("Chapter › Section › Subsection"); null when the
    # document has none or was ingested before section paths (re-ingest it to get them).
    section: str | None = None
    text: str
    # "ocr" when the passage was read from a scanned page or an image, else "text".
    text_source: str = "text"
    # Tesseract's mean word confidence on the passage's page (0-100); null unless OCR'd.
    ocr_confidence: int | None = None
    score: float
    stages: dict[str, float | int | None]
    other_chunks: int | None = Field(
        default=None,
        description="with `group=document`: how many more of this document's passages ranked "
        "among the candidates (0: only this one); null with `group=chunk`",
    )
    other_pages: list[int] | None = Field(
        default=None,
        description="with `group=document`: the pages of those passages, each once, best "
        "first (this result's own page left out); null with `group=chunk`",
    )
    explain: dict[str, Any] | None = Field(
        default=None,
        description="with `explain: true`: keyword_rank/score, dense_rank/score, fused_rank/"
        "score, rerank_score, rules (exact_match, arm_first_reserved, heading_promoted, "
        "page_role_demoted:<role>, relevance_gate) and matched_terms",
    )


class SearchOut(BaseModel):
    group: Grouping
    results: list[SearchResultOut]
    relevant: bool
    explain: dict[str, Any] | None = Field(
        default=None,
        description="with `explain: true`: `fusion` (mode, weights, rrf_k, rules), `gate` "
        "(relevant, reason, threshold, best_similarity) and `exact_terms`",
    )
    timings: dict[str, float]
    total_ms: float


class QueryIn(ScopeFields):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=QUESTION_CHARS_CEILING)
    k: int | None = Field(default=None, ge=1, le=K_CEILING)


@pydantic_dataclass(frozen=True)
class CitationOut(Citation):
    """A citation as the API sends it: the fields of `Citation`, documented for /openapi.json."""

    chunk_id: str = Field(
        default="",
        max_length=64,
        description="the cited passage; pass it as `chunk` to GET /documents/{id}/pages/{page}.png",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_citation(cls, citation: object) -> object:
        # An answer holds plain `Citation`s; this reads one by its fields.
        if isinstance(citation, Citation) and not isinstance(citation, cls):
            return asdict(citation)
        return citation


class QueryOut(Record):
    answer: str
    citations: list[CitationOut]
    refused: bool
    cache: Literal["hit", "miss"]
    timings: dict[str, float]
    total_ms: float
    answer_id: str = Field(
        default="", description="this answer's id: rate it with POST /answers/{answer_id}/feedback"
    )


class QuotaOut(BaseModel):
    """How much of one quota is used."""

    used: int
    limit: int


class QuotasOut(BaseModel):
    documents: QuotaOut
    stored_bytes: QuotaOut
    chunks: QuotaOut
    queued_jobs: QuotaOut
    conversations: QuotaOut = Field(description="the caller's conversations")
    conversation_messages: QuotaOut = Field(
        description="messages taken by the caller's fullest conversation (two per turn)"
    )
    conversation_bytes: QuotaOut = Field(description="the tenant's stored conversation bytes")
    ocr_pages: QuotaOut = Field(description="pages of the tenant's documents read by OCR")


_CACHE_IN_REACH = (
    "null for a caller who does not read every collection (the cache serves every collection's "
    "questions)"
)


class StatsOut(BaseModel):
    documents: int
    chunks: int
    cache_entries: int | None = Field(description=_CACHE_IN_REACH)
    cache_hits: int | None = Field(description=_CACHE_IN_REACH)
    cache_misses: int | None = Field(description=_CACHE_IN_REACH)
    cache_hit_rate: float | None = Field(description=_CACHE_IN_REACH)
    quotas: QuotasOut


class ErrorDetail(BaseModel):
    code: str
    message: str
    request_id: str | None = Field(
        default=None, description="on server errors (5xx): quote it to find the details in logs"
    )


class ErrorOut(BaseModel):
    """The one body of every error response."""

    error: ErrorDetail


class HealthOut(BaseModel):
    status: Literal["ok"] = "ok"


class StatusOut(BaseModel):
    status: str
    detail: dict[str, str] = Field(default_factory=dict)
    features: dict[str, str] = Field(
        default_factory=dict, description="optional features: `ocr` available or unavailable"
    )


class HighlightOut(BaseModel):
    start: int = Field(description="offset of the passage's first character in `text`")
    end: int = Field(description="offset just past the passage's last character")


class PageTextOut(Record):
    document_id: str
    source: str
    page: int
    page_label: str
    text: str = Field(description="the page's indexed text")
    highlight: HighlightOut | None = Field(description="the requested passage, if any")

    @field_validator("highlight", mode="before")
    @classmethod
    def _span(cls, span: object) -> object:
        # The service gives the passage as a (start, end) pair of offsets.
        return {"start": span[0], "end": span[1]} if isinstance(span, tuple) else span
