"""The page a citation points to: a PDF page picture with the passage highlighted, or the
page's text with the passage's offsets (every format), plus the kept original PDFs."""

from __future__ import annotations

import functools
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from app.domain import Chunk, OcrLayout
from app.errors import InvalidInput, NotFound, PageUnavailable, or_not_found
from app.ingestion.loaders import IMAGE_EXTENSIONS
from app.rendering.image_pdf import PixelCaps
from app.rendering.isolated import (
    image_to_pdf_isolated,
    page_count_isolated,
    render_page_isolated,
)
from app.rendering.ocr_layouts import dump_layouts, read_layout
from app.rendering.pdf_page import (
    PageOutOfRange,
    PageRenderFailed,
    Passage,
    RenderedPage,
    RenderLimits,
)
from app.services.blocks.admission import Caller
from app.services.blocks.page_lane import PageLane
from app.storage.documents import DocumentRecord, DocumentStore

if TYPE_CHECKING:
    from app.rendering.cache import FailedPages, PageImageCache

log = logging.getLogger(__name__)

PDF_SUFFIX = ".pdf"
# Sources whose pages have pictures: PDFs, and images (kept as a PDF of their frames).
PICTURED_SUFFIXES = (PDF_SUFFIX, *IMAGE_EXTENSIONS)


class PageChunks(Protocol):
    """Reads the chunks of one page of a tenant's document, in page order."""

    def page_chunks(self, *, tenant_id: str, document_id: str, page: int) -> list[Chunk]: ...


@dataclass(frozen=True)
class KeptOriginals:
    """The original PDFs kept so their pages can be shown, one folder per tenant, each with its
    page count beside it, and the page pictures cached from them."""

    root: Path  # see `originals_dir`
    images: PageImageCache
    limits: RenderLimits  # of the child that counts a kept PDF's pages
    # The child that turns an uploaded image into its PDF (the parse child's time, memory and
    # CPU), and the pixels it may decode: the image's frames are user pixels, never decoded here.
    image_limits: RenderLimits
    pixel_caps: PixelCaps

    def path(self, *, tenant_id: str, document_id: str) -> Path:
        """Where a document's original PDF is kept, under the tenant's folder."""
        return self.root / tenant_id / f"{document_id}{PDF_SUFFIX}"

    def _count_path(self, tenant_id: str, document_id: str) -> Path:
        return self.root / tenant_id / f"{document_id}.pages"

    def _layouts_path(self, tenant_id: str, document_id: str) -> Path:
        return self.root / tenant_id / f"{document_id}.ocr.json"

    def keep(
        self,
        *,
        tenant_id: str,
        document_id: str,
        source: str,
        path: Path,
        ocr_layouts: dict[int, OcrLayout] | None = None,
    ) -> None:
        """Keep a copy of an indexed PDF (an image as a PDF of its frames, written in a limited
        child), its page count and the words and boxes of its OCR'd pages; other formats keep
        nothing.

        Called under the tenant's documents lock, so a concurrent delete sees the copy or none; the
        copy is written beside its final name and renamed, so a reader never sees half a file.
        The page count (read by PDFium in a limited child) lets a page request beyond the
        document be refused without starting a renderer.
        """
        target = self.path(tenant_id=tenant_id, document_id=document_id)
        counted = self._count_path(tenant_id, document_id)
        self._keep_layouts(tenant_id, document_id, ocr_layouts or {})
        if not source.lower().endswith(PICTURED_SUFFIXES):
            target.unlink(missing_ok=True)  # a replacement of another format leaves no stale PDF
            counted.unlink(missing_ok=True)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")
        if source.lower().endswith(PDF_SUFFIX):
            shutil.copyfile(path, partial)
            count = self._count(partial, document_id)
        else:
            try:
                count = image_to_pdf_isolated(path, partial, self.image_limits, self.pixel_caps)
            except Exception as exc:  # its text is indexed; only its pictures are lost
                log.warning(
                    "image not kept as pages",
                    extra={
                        "document_id": document_id,
                        "error": getattr(exc, "reason", type(exc).__name__),
                    },
                )
                partial.unlink(missing_ok=True)
                target.unlink(missing_ok=True)
                counted.unlink(missing_ok=True)
                return
        if count is None:
            counted.unlink(missing_ok=True)  # pictures of this version are checked by rendering
        else:
            partial_count = counted.with_name(f".{counted.name}.partial")
            partial_count.write_text(str(count), encoding="ascii")
            os.replace(partial_count, counted)
        os.replace(partial, target)

    def _keep_layouts(
        self, tenant_id: str, document_id: str, layouts: dict[int, OcrLayout]
    ) -> None:
        kept = self._layouts_path(tenant_id, document_id)
        if not layouts:
            kept.unlink(missing_ok=True)
            return
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_name(f".{kept.name}.partial")
        partial.write_text(dump_layouts(layouts), encoding="utf-8")
        os.replace(partial, kept)

    def ocr_layout(self, *, tenant_id: str, document_id: str, page: int) -> OcrLayout | None:
        """The words and boxes OCR read on a page; None when the page has a text layer."""
        return read_layout(self._layouts_path(tenant_id, document_id), page)

    def _count(self, path: Path, document_id: str) -> int | None:
        try:
            return page_count_isolated(path, self.limits)
        except PageRenderFailed as exc:
            log.warning(
                "kept PDF not counted", extra={"document_id": document_id, "reason": exc.reason}
            )
            return None

    def page_count(self, *, tenant_id: str, document_id: str) -> int | None:
        """The kept PDF's page count; None when unknown (kept before counts were recorded)."""
        try:
            return int(self._count_path(tenant_id, document_id).read_text(encoding="ascii"))
        except (OSError, ValueError):
            return None

    def drop(self, *, tenant_id: str, document_id: str) -> None:
        """Delete a document's kept PDF, its page count and its cached page pictures."""
        self.path(tenant_id=tenant_id, document_id=document_id).unlink(missing_ok=True)
        self._count_path(tenant_id, document_id).unlink(missing_ok=True)
        self._layouts_path(tenant_id, document_id).unlink(missing_ok=True)
        self.images.drop_document(tenant_id, document_id)


@dataclass(frozen=True)
class PageDeps:
    """What showing a cited page needs, built once per process by the container."""

    documents: DocumentStore
    chunks: PageChunks
    originals: KeptOriginals
    render_limits: RenderLimits
    failures: FailedPages


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
    return or_not_found(deps.documents.get(tenant_id, document_id), "document not found")


def _page_chunks(deps: PageDeps, tenant_id: str, document_id: str, page: int) -> list[Chunk]:
    if page < 1:
        raise NotFound(f"page {page} does not exist; pages are numbered from 1")
    return deps.chunks.page_chunks(tenant_id=tenant_id, document_id=document_id, page=page)


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
    deps: PageDeps, *, tenant_id: str, document_id: str, page: int, chunk_id: str | None
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


@dataclass(frozen=True)
class PictureJob:
    """A page picture to draw: everything checked, nothing cached."""

    document_id: str
    path: Path
    page: int
    passage: Passage | None
    page_key: tuple[str, str, str, int]  # (tenant, document, content hash, page)
    chunk_id: str | None

    @property
    def image_key(self) -> tuple[str, str, str, int, str | None]:
        """The cache key of the picture: the page and the highlighted chunk."""
        return (*self.page_key, self.chunk_id)


def _not_drawn(failure: PageRenderFailed, document_id: str, page: int) -> PageUnavailable:
    return PageUnavailable(
        f"{failure.message}; GET /documents/{document_id}/pages/{page}/text shows its text"
    )


def _no_original(status: str) -> str:
    """Why a PDF or image has no kept original, by its document's state, and what to do."""
    if status == "failed":
        return (
            "this document failed to index, so there is no page to show; its job says why "
            "(GET /jobs?status=failed): upload a repaired file"
        )
    if status in ("queued", "processing"):
        return "this document is still being indexed; its pages can be shown once it is done"
    return (
        "the original of this document was not kept (it was indexed before page pictures "
        "existed); upload it again to see its pages"
    )


def _beyond(page: int, page_count: int) -> NotFound:
    return NotFound(f"page {page} does not exist; the document has {page_count} page(s)")


def picture_job(
    deps: PageDeps, *, tenant_id: str, document_id: str, page: int, chunk_id: str | None
) -> RenderedPage | PictureJob:
    """The cached picture, or the job that draws it; every refusal (404, 409, 422) comes from
    here, in milliseconds: a page beyond the document or one that failed before starts nothing.
    """
    record = _document(deps, tenant_id, document_id)
    if not record.source.lower().endswith(PICTURED_SUFFIXES):
        raise PageUnavailable(
            "this document is not a PDF or an image, so it has no page pictures; "
            f"GET /documents/{document_id}/pages/{page}/text shows the passage in its text"
        )
    path = deps.originals.path(tenant_id=tenant_id, document_id=document_id)
    if not path.exists():
        raise PageUnavailable(_no_original(record.status))
    page_count = deps.originals.page_count(tenant_id=tenant_id, document_id=document_id)
    if page_count is not None and page > page_count:
        raise _beyond(page, page_count)
    page_key = (tenant_id, document_id, record.content_sha256, page)
    failed = deps.failures.recall(page_key)
    if failed is not None:
        raise _not_drawn(failed, document_id, page)
    chunks = _page_chunks(deps, tenant_id, document_id, page)
    cited = _cited_chunk(chunks, chunk_id, page)
    passage = None
    if cited is not None:
        layout = deps.originals.ocr_layout(tenant_id=tenant_id, document_id=document_id, page=page)
        passage = Passage(_page_body(cited), _position_hint(cited, chunks), layout)
    job = PictureJob(document_id, path, page, passage, page_key, chunk_id)
    cached = deps.originals.images.get(job.image_key)
    return job if cached is None else cached


def draw_picture(deps: PageDeps, job: PictureJob) -> RenderedPage:
    """Draw the page in a limited child; a failure is remembered for the page's version."""
    cached = deps.originals.images.get(job.image_key)  # drawn while this request waited
    if cached is not None:
        return cached
    failed = deps.failures.recall(job.page_key)
    if failed is not None:
        raise _not_drawn(failed, job.document_id, job.page)
    try:
        rendered = render_page_isolated(job.path, job.page, deps.render_limits, job.passage)
    except PageOutOfRange as exc:
        raise _beyond(job.page, exc.page_count) from None
    except PageRenderFailed as exc:
        deps.failures.remember(job.page_key, exc)
        log.warning(
            "page could not be rendered",
            extra={"document_id": job.document_id, "page": job.page, "reason": exc.reason},
        )
        raise _not_drawn(exc, job.document_id, job.page) from None
    if job.passage is not None and rendered.highlight_boxes == 0:
        log.info(
            "passage not located on page", extra={"document_id": job.document_id, "page": job.page}
        )
    deps.originals.images.put(job.image_key, rendered)
    return rendered


async def page_image(
    lane: PageLane,
    deps: PageDeps,
    caller: Caller,
    *,
    document_id: str,
    page: int,
    chunk_id: str | None,
) -> RenderedPage:
    """A PDF page as PNG, the cited chunk highlighted: cached, refused, or drawn in a slot."""
    found = await lane.look_up(
        functools.partial(
            picture_job,
            deps,
            tenant_id=caller.tenant_id,
            document_id=document_id,
            page=page,
            chunk_id=chunk_id,
        )
    )
    if not isinstance(found, PictureJob):
        return found
    slot = await lane.renders.acquire(caller)
    try:
        return await lane.draw(draw_picture, deps, found)
    finally:
        slot.release()
