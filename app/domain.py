"""Domain types shared by every layer: pages in, chunks out, hits back."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, get_args

PageKind = Literal["text", "table", "code"]
# Pages that point at content rather than hold it (app/ingestion/page_roles.py); None: content.
PageRole = Literal["contents", "index", "figures", "bibliography", "blank", "cover"]
PAGE_ROLES: tuple[str, ...] = get_args(PageRole)

# A user's (or an API key's) role in its tenant, weakest first (app/api/access.py: who may call
# which route).
Role = Literal["reader", "member", "admin"]
ROLES: tuple[Role, ...] = get_args(Role)


# What an API key may do beyond its role (app/services/api_keys.py). `keys:manage`: make and
# revoke keys, which otherwise needs a signed-in person.
KeyScope = Literal["keys:manage"]
KEY_SCOPES: tuple[KeyScope, ...] = get_args(KeyScope)


Listed = TypeVar("Listed")  # what a listing holds: documents, jobs, users, runs, ...


@dataclass(frozen=True)
class ListedPage(Generic[Listed]):
    """One page of a listing, in its order, and how many there are in all over every page (of
    what the listing keeps: the statuses asked, the collections shown, ...)."""

    records: list[Listed]
    total: int


@dataclass(frozen=True)
class QueueBacklog:
    """What waits in a job queue: how many jobs, and how long (seconds) the oldest has waited."""

    queued: int
    oldest_wait_s: float


def role_rank(role: str) -> int:
    """The role's place in ROLES (reader 0, member 1, admin 2); ValueError for another name."""
    return ROLES.index(role)  # type: ignore[arg-type]


def role_at_least(role: str, minimum: str) -> bool:
    """Whether `role` may do what `minimum` may."""
    return role_rank(role) >= role_rank(minimum)


def weaker_role(first: Role, second: Role) -> Role:
    """The weaker of two roles (a key never acts above its owner's current role)."""
    return first if role_rank(first) <= role_rank(second) else second


@dataclass(frozen=True)
class HeadingMark:
    """A heading that starts on a page: its offset in the page text, depth (1: chapter), title."""

    offset: int
    level: int
    title: str


@dataclass(frozen=True)
class OcrWord:
    """One word Tesseract read, with its box in the OCR picture's pixels (left, top, right,
    bottom), its confidence (0-100) and its (block, paragraph, line) numbers."""

    text: str
    box: tuple[int, int, int, int]
    confidence: float
    line: tuple[int, int, int] = (0, 0, 0)


@dataclass(frozen=True)
class OcrLayout:
    """How a page's text was read by OCR: the picture's size in pixels, the words in reading
    order (the page text is built from them), the mean confidence and the script detected
    (`latin`, `arabic` or `mixed`). `problem` is set, and the words empty, when the page could
    not be read; such a page is reported in the job's warnings and not indexed."""

    width: int
    height: int
    words: tuple[OcrWord, ...] = ()
    confidence: float = 0.0
    script: str = "latin"
    problem: str | None = None


@dataclass(frozen=True)
class Page:
    """One citable unit of a document: a PDF page, a slide, a sheet, or the whole text file.

    `number` is 1-based (the page a reader opens); `label` is the printed label (`iv`, `A-1`).
    For tables, `header` is the header row repeated in every chunk and `text` holds the data rows,
    one per line, with `first_row` the 1-based row number of the first one. `headings` are the
    section headings that start on the page (from a PDF outline, DOCX heading styles or Markdown
    `#` lines), in text order; a page without one continues the previous page's section.
    `ocr` holds the words and boxes of a page whose text was read by OCR.
    """

    number: int
    label: str
    text: str
    kind: PageKind = "text"
    header: str | None = None
    first_row: int = 1
    language: str | None = None
    role: PageRole | None = None
    headings: tuple[HeadingMark, ...] = ()
    ocr: OcrLayout | None = None  # set when the text came from OCR, not a text layer


@dataclass(frozen=True)
class Chunk:
    """A piece of one page of one document of one tenant, with everything a citation needs."""

    id: str
    tenant_id: str
    document_id: str
    source: str
    page: int
    page_label: str
    chunk_index: int
    start: int
    end: int
    text: str
    metadata: dict[str, str | int] = field(default_factory=dict, compare=False, hash=False)
    page_role: PageRole | None = None


# Chunk.metadata keys of a chunk whose text was read by OCR: TEXT_SOURCE_KEY is "ocr" (absent
# for a text layer) and OCR_CONFIDENCE_KEY Tesseract's mean word confidence on its page (0-100).
TEXT_SOURCE_KEY = "text_source"
OCR_CONFIDENCE_KEY = "ocr_confidence"


def text_source(chunk: Chunk) -> str:
    """Where the chunk's text came from: "ocr" or "text" (a text layer or a text format)."""
    return "ocr" if chunk.metadata.get(TEXT_SOURCE_KEY) == "ocr" else "text"


def ocr_confidence(chunk: Chunk) -> int | None:
    """Tesseract's confidence (0-100) in the chunk's page, or None for text that was not OCR'd."""
    value = chunk.metadata.get(OCR_CONFIDENCE_KEY)
    return int(value) if value is not None else None


# Chunk.metadata key of the section path ("Installing R › Sub-architectures › Multilib").
SECTION_KEY = "section"
SECTION_SEPARATOR = " › "


def section_path(chunk: Chunk) -> str | None:
    """The chunk's section path as a breadcrumb, or None when it has none."""
    section = chunk.metadata.get(SECTION_KEY)
    return str(section) if section else None


def indexed_text(chunk: Chunk, with_path: bool = True) -> str:
    """What is embedded and keyword-indexed: the section path above the chunk's own text.

    The path is context for retrieval only; users and the LLM see `chunk.text` (and /search the
    path as a separate breadcrumb field).
    """
    section = section_path(chunk) if with_path else None
    return f"{section}\n{chunk.text}" if section else chunk.text


@dataclass
class SearchHit:
    """A ranked chunk with the evidence of each retrieval stage."""

    chunk: Chunk
    score: float
    stages: dict[str, float | int | None] = field(default_factory=dict)
    # Searched by document: the other ranked chunks of the same document this hit stands for,
    # best first (always empty when searched by chunk).
    same_document: list[Chunk] = field(default_factory=list)
    # Its place in the fused order, and the rules that moved it after fusion (exact_match,
    # arm_first_reserved, heading_promoted, page_role_demoted:<role>): what /search's `explain`
    # shows.
    fused_rank: int | None = None
    rules: list[str] = field(default_factory=list)


def chunk_id(tenant_id: str, document_id: str, page: int, text: str) -> str:
    """Stable content hash over (tenant, document, page, chunk text): re-ingesting is an upsert."""
    digest = hashlib.sha256()
    for part in (tenant_id, document_id, str(page), text):
        digest.update(part.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()[:32]


# Every tenant's first collection (migration 0012 put every existing document in it).
GENERAL_COLLECTION = "general"


def document_id(tenant_id: str, source: str, collection_id: str = GENERAL_COLLECTION) -> str:
    """The id a new document named `source` gets in a collection: re-uploading the name to the
    same collection replaces it, and each collection holds its own document of that name.

    In `general` it is the id documents had before collections existed, so those ids, their
    chunk ids and their URLs stay valid. An existing document keeps the id it was given (also
    when moved): `DocumentStore.identify` finds it before this is used.
    """
    if collection_id == GENERAL_COLLECTION:
        key = f"{tenant_id}\x00{source}"
    else:
        key = f"{tenant_id}\x00{collection_id}\x00{source}"
    return "doc_" + hashlib.sha256(key.encode()).hexdigest()[:24]


@dataclass
class RetrievalResult:
    """Ranked hits for a query, and whether any of them is relevant enough to answer from."""

    hits: list[SearchHit]
    relevant: bool
    reason: str = ""
    # How the ranking came about: the fusion's weights and rules, the relevance gate's values.
    explain: dict[str, Any] = field(default_factory=dict)
