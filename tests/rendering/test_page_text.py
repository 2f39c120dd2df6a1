"""A page's text rebuilt from its chunks' offsets: overlaps written once, table headers dropped."""

from __future__ import annotations

import pytest

from app.domain import Chunk, Page
from app.ingestion import chunk_pages
from app.services.pages import _page_body, _stitch

pytestmark = pytest.mark.unit


def _chunks(page: Page, size: int, overlap: int) -> list[Chunk]:
    chunks = chunk_pages(
        [page],
        tenant_id="t",
        document_id="d",
        source="s.txt",
        chunk_size=size,
        chunk_overlap=overlap,
    )
    return sorted(chunks, key=lambda c: c.start)


def test_overlapping_chunks_rebuild_the_page_and_locate_each_chunk() -> None:
    text = " ".join(f"Sentence number {n} says something about item {n * 7}." for n in range(40))
    chunks = _chunks(Page(number=1, label="1", text=text), 200, 40)
    assert len(chunks) > 5
    rebuilt, where = _stitch(chunks)
    assert rebuilt == text
    for chunk in chunks:
        assert rebuilt[where[chunk.id] : where[chunk.id] + len(chunk.text)] == chunk.text


def test_table_chunks_contribute_their_rows_not_their_repeated_header() -> None:
    rows = "\n".join(f"bolt-{n},{n * 5} Nm" for n in range(60))
    page = Page(number=1, label="rows 1-60", text=rows, kind="table", header="part,torque")
    chunks = _chunks(page, 200, 0)
    assert len(chunks) > 2 and all(c.text.startswith("part,torque\n") for c in chunks)
    rebuilt, where = _stitch(chunks)
    assert rebuilt.count("part,torque") == 0
    assert rebuilt.replace(" ", "\n") == rows.replace(" ", "\n")
    for chunk in chunks:
        body = _page_body(chunk)
        assert rebuilt[where[chunk.id] : where[chunk.id] + len(body)] == body
