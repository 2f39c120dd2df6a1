"""The page a citation points to: a PDF page picture with the passage highlighted, or the
page's text with the passage's offsets (every format), plus the kept original PDFs."""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from app.domain import Chunk
from app.errors import InvalidInput, NotFound, PageUnavailable
from app.rendering.pdf_page import (
    PageOutOfRange,
    Passage,
    RenderedPage,
    UnreadablePdf,
    render_page_isolated,
)
from app.storage.documents import DocumentRecord, DocumentStore

if TYPE_CHECKING:
    from app.rendering.cache import PageImageCache

log = logging.getLogger(__name__)

PDF_SUFFIX = ".pdf"


class PageChunks(Protocol):
    """Reads the chunks of one page of a tenant's document, in page order."""

    def page_chunks(self, tenant_id: str, document_id: str, page: int) -> list[Chunk]: ...


@dataclass(frozen=True)
class KeptOriginals:
    """The original PDFs kept so their pages can be shown, one folder per tenant, and the page
    pictures cached from them."""

    root: Path  # see `originals_dir`
    images: PageImageCache

    def path(self, tenant_id: str, document_id: str) -> Path:
        """Where a document's original PDF is kept, under the tenant's folder."""
        return self.root / tenant_id / f"{document_id}{PDF_SUFFIX}"

    def keep(self, tenant_id: str, document_id: str, source: str, path: Path) -> None:
        """Keep a copy of an indexed PDF so its pages can be shown; other formats keep nothing.

        Called under the document's lock, so a concurrent delete sees the copy or none; the
        copy is written beside its final name and renamed, so a reader never sees half a file.
        """
        target = self.path(tenant_id, document_id)
        if not source.lower().endswith(PDF_SUFFIX):
            target.unlink(missing_ok=True)  # a replacement of another format leaves no stale PDF
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")
        shutil.copyfile(path, partial)
        os.replace(partial, target)

    def drop(self, tenant_id: str, document_id: str) -> None:
        """Delete a document's kept PDF and its cached page pictures."""
        self.path(tenant_id, document_id).unlink(missing_ok=True)
        self.images.drop_document(tenant_id, document_id)


@dataclass(frozen=True)
class PageDeps:
    """What showing a cited page needs, built once per process by the container."""

    documents: DocumentStore
    chunks: PageChunks
    originals: KeptOriginals
    image_max_px: int
    render_timeout_s: float


@dataclass(frozen=True)
class PageText:
    """A page's text as indexed, and where the requested passage sits in it."""

    document_id: str
    source: str
    page: int
    page_label: str
    text: str
    highlight: tuple[int, int] | None


def originals_dir(data_dir: Path) -> Path:
    """The folder of the kept original PDFs, one subfolder per tenant."""
    return data_dir / "originals"


def _document(deps: PageDeps, tenant_id: str, document_id: str) -> DocumentRecord:
    record = deps.documents.get(tenant_id, document_id)
    if record is None:
        raise NotFound("document not found")
    return record


def _page_chunks(deps: PageDeps, tenant_id: str, document_id: str, page: int) -> list[Chunk]:
    if page < 1:
        raise NotFound(f"page {page} does not exist; pages are numbered from 1")
    return deps.chunks.page_chunks(tenant_id, document_id, page)


def _cited_chunk(chunks: list[Chunk], chunk_id: str | None, page: int) -> Chunk | None:
    if chunk_id is None:
        return None
    for chunk in chunks:
        if chunk.id == chunk_id:
            return chunk
    raise InvalidInput(f"chunk {chunk_id} is not a passage of page {page} of this document")


def _page_body(chunk: Chunk) -> str:
    """The part of a chunk that is the page's own text (a table chunk repeats its header)."""
    length = chunk.end - chunk.start
    return chunk.text[len(chunk.text) - length :] if length <= len(chunk.text) else chunk.text


def _stitch(chunks: list[Chunk]) -> tuple[str, dict[str, int]]:
    """The page text rebuilt from its chunks' offsets, and where each chunk starts in it.

    Chunks cover the page's text except whitespace between them, so gaps become one space.
    """
    parts: list[str] = []
    where: dict[str, int] = {}
    written = 0  # page offset up to which text is written
    length = 0  # characters written
    for chunk in chunks:
        body = _page_body(chunk)
        if chunk.start > written and parts:
            parts.append(" ")
            length += 1
        skip = max(0, written - chunk.start)  # overlap with what is already written
        where[chunk.id] = length - skip
        parts.append(body[skip:])
        length += len(body) - skip
        written = max(written, chunk.start + len(body))
    return "".join(parts), where


def page_text(
    deps: PageDeps, tenant_id: str, document_id: str, page: int, chunk_id: str | None
) -> PageText:
    """The indexed text of a page of any format, with the cited chunk's span in it."""
    record = _document(deps, tenant_id, document_id)
    chunks = _page_chunks(deps, tenant_id, document_id, page)
    if not chunks:
        raise NotFound(f"page {page} of this document has no indexed text")
    cited = _cited_chunk(chunks, chunk_id, page)
    text, where = _stitch(chunks)
    highlight = None
    if cited is not None:
        begin = where[cited.id]
        highlight = (begin, begin + len(_page_body(cited)))
    return PageText(
        document_id=record.document_id,
        source=record.source,
        page=page,
        page_label=chunks[0].page_label,
        text=text,
        highlight=highlight,
    )


def _position_hint(cited: Chunk, chunks: list[Chunk]) -> float:
    page_length = max(chunk.end for chunk in chunks)
    return cited.start / page_length if page_length else 0.0


def page_image(
    deps: PageDeps, tenant_id: str, document_id: str, page: int, chunk_id: str | None
) -> RenderedPage:
    """A PDF page as PNG, the cited chunk highlighted; cached per content hash."""
    record = _document(deps, tenant_id, document_id)
    if not record.source.lower().endswith(PDF_SUFFIX):
        raise PageUnavailable(
            "this document is not a PDF, so it has no page pictures; "
            f"GET /documents/{document_id}/pages/{page}/text shows the passage in its text"
        )
    path = deps.originals.path(tenant_id, document_id)
    if not path.exists():
        raise PageUnavailable(
            "the original PDF of this document was not kept (it was indexed before page "
            "pictures existed, or is still being indexed); upload it again to see its pages"
        )
    chunks = _page_chunks(deps, tenant_id, document_id, page)
    cited = _cited_chunk(chunks, chunk_id, page)
    key = (tenant_id, document_id, record.content_sha256, page, chunk_id)
    cached = deps.originals.images.get(key)
    if cached is not None:
        return cached
    passage = Passage(_page_body(cited), _position_hint(cited, chunks)) if cited else None
    try:
        rendered = render_page_isolated(
            path,
            page,
            deps.image_max_px,
            passage,
            deps.render_timeout_s,
        )
    except PageOutOfRange as exc:
        raise NotFound(f"page {page} does not exist; {exc}") from None
    except UnreadablePdf as exc:
        log.warning("page could not be rendered", extra={"document_id": document_id})
        raise PageUnavailable(f"the PDF page could not be rendered ({exc})") from None
    if passage is not None and rendered.highlight_boxes == 0:
        log.info("passage not located on page", extra={"document_id": document_id, "page": page})
    deps.originals.images.put(key, rendered)
    return rendered
