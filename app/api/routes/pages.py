"""The page a citation points to: a PNG of a PDF page, or any page's text, passage marked."""

from __future__ import annotations

import functools
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response
from fastapi.concurrency import run_in_threadpool

from app.api.deps import (
    CallerAccess,
    CollectionServiceDep,
    PageLaneDep,
    PageRateLimit,
    Pages,
    Principal,
)
from app.api.errors import error_responses
from app.api.openapi import content_response
from app.api.schemas import PageTextOut
from app.services import pages as service

# Every page route counts against the caller's RAG_RATE_LIMIT_PAGES_PER_MINUTE.
router = APIRouter(tags=["documents"], dependencies=[PageRateLimit])

PageNumber = Annotated[int, Path(ge=1, le=1_000_000, description="1-based page number")]
ChunkParam = Annotated[
    str | None,
    Query(
        pattern=r"^[0-9a-f]{32}$",
        description="a citation's `chunk_id`: its passage is highlighted",
    ),
]
# The picture can change only when the document is replaced; a client may keep it briefly.
_IMAGE_CACHE_CONTROL = "private, max-age=300"
_PNG = "image/png"  # what the route sends, and documents


@router.get(
    "/documents/{document_id}/pages/{page}.png",
    response_class=Response,
    responses={
        **content_response(
            "the rendered page; `X-Highlight-Boxes` counts the boxes drawn over the passage, "
            "`X-Highlight-Top` (0..1) is where the first starts",
            _PNG,
        ),
        **error_responses(404, 409, 422, 429, 503),
    },
)
async def page_image(
    document_id: str,
    page: PageNumber,
    principal: Principal,
    lane: PageLaneDep,
    deps: Pages,
    collections: CollectionServiceDep,
    access: CallerAccess,
    chunk: ChunkParam = None,
) -> Response:
    """A PDF page as PNG, the cited passage highlighted; 409 when it cannot be drawn (not a
    PDF, or the page failed: too slow, too large, damaged); 429/503 when no render slot frees
    up within a second or two (Retry-After says when to come back)."""
    # 404, exactly as for a missing document, unless the caller reads its collection.
    await run_in_threadpool(
        functools.partial(collections.document_collection, access, document_id=document_id)
    )
    rendered = await service.page_image(
        lane,
        deps,
        principal.as_caller(),
        document_id=document_id,
        page=page,
        chunk_id=chunk,
    )
    headers = {
        "Cache-Control": _IMAGE_CACHE_CONTROL,
        "X-Highlight-Boxes": str(rendered.highlight_boxes),
    }
    if rendered.highlight_top is not None:  # lets a viewer scroll the passage into view
        headers["X-Highlight-Top"] = f"{rendered.highlight_top:.4f}"
    return Response(rendered.png, media_type=_PNG, headers=headers)


@router.get(
    "/documents/{document_id}/pages/{page}/text",
    response_model=PageTextOut,
    responses=error_responses(404, 422, 429),
)
def page_text(
    document_id: str,
    page: PageNumber,
    principal: Principal,
    deps: Pages,
    collections: CollectionServiceDep,
    access: CallerAccess,
    chunk: ChunkParam = None,
) -> PageTextOut:
    """A page's indexed text (any format) with the cited passage's offsets in it."""
    # 404 unless the caller reads it
    collections.document_collection(access, document_id=document_id)
    found = service.page_text(
        deps, tenant_id=principal.tenant_id, document_id=document_id, page=page, chunk_id=chunk
    )
    return PageTextOut.model_validate(found)
