"""Pages to citable chunks: prose and code by the overlap-exact splitter, tables by rows.

Chunk ids are content hashes (`app.domain.chunk_id`) so re-ingesting a file is an upsert.
When the same text occurs twice on one page (a repeated disclaimer, a table row block), the
second occurrence hashes `text + "\\x00#2"`, so ids stay distinct and still stable across runs.
A chunk under a section heading also hashes its section path (`metadata["section"]`, which is
embedded and keyword-indexed with the text): re-ingesting the same file upserts the same ids,
while a chunk whose path changed (a file first ingested before section paths existed, or an
edited outline) gets a new id, so its vector and keyword tokens are never those of the old path.
With `section_chunks`, a section start (a heading mark) also starts a new chunk: the splitter
runs on each section of a page alone, so a chunk never straddles two sections and the overlap is
shared only between neighbours inside one section.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import pairwise

from app.domain import OCR_CONFIDENCE_KEY, SECTION_KEY, TEXT_SOURCE_KEY, Chunk, Page, chunk_id
from app.ingestion.normalise import MAX_LABEL_CHARS, normalise_label
from app.ingestion.section_paths import SectionPaths, path_for_span
from app.ingestion.splitter import (
    TABLE_SEPARATORS,
    Span,
    add_overlap,
    separators_for,
    split_cores,
    split_text,
)

# A section piece shorter than this share of a chunk (a heading line with its first subsection
# right below it, or a heading at the foot of a page) joins its neighbour instead of becoming a
# chunk that holds nothing but a title.
MIN_SECTION_SHARE = 8


def _row_range_label(page: Page, first: int, last: int) -> str:
    rows = f"row {first}" if first == last else f"rows {first}-{last}"
    # The sheet title gives way so the rows always fit in the label column.
    title = normalise_label(page.label, MAX_LABEL_CHARS - len(rows) - 1)
    return f"{title} {rows}" if title else rows


def _table_spans(page: Page, chunk_size: int) -> list[tuple[Span, str]]:
    """Whole rows per chunk under the header; (span of the rows, row-range label)."""
    header = page.header or ""
    # Room left for rows once the header and its line break are in. A header that eats
    # more than 3/4 of a chunk would leave rows cut into slivers, so rows keep a quarter of
    # a chunk at least: such chunks may exceed chunk_size by up to that quarter.
    room = max(chunk_size - len(header) - 1, chunk_size // 4, 1)
    text = page.text
    result: list[tuple[Span, str]] = []
    for core in split_cores(text, 0, len(text), room, TABLE_SEPARATORS):
        end = core.start + len(text[core.start : core.end].rstrip("\n"))
        if not text[core.start : end].strip():
            continue
        first = page.first_row + text.count("\n", 0, core.start)
        last = page.first_row + text.count("\n", 0, max(end - 1, core.start))
        result.append((Span(core.start, end), _row_range_label(page, first, last)))
    return result


def section_starts(page: Page, chunk_size: int) -> list[int]:
    """Offsets where the page's text is cut so a new section starts a new chunk: each heading's
    offset, except where the piece before or after it would hold only a few characters."""
    minimum = max(chunk_size // MIN_SECTION_SHARE, 1)
    cuts = [0]
    for offset in sorted({mark.offset for mark in page.headings}):
        # Too close to the last cut: that piece is a bare heading, which joins this section.
        # Too close to the end: a heading at the foot of the page stays with the text above.
        if offset - cuts[-1] >= minimum and len(page.text[offset:].strip()) >= minimum:
            cuts.append(offset)
    return cuts[1:]


def _sectioned_spans(
    page: Page, chunk_size: int, chunk_overlap: int, separators: tuple[str, ...]
) -> list[Span]:
    """Spans that never straddle a section start: each section is split on its own, with the
    overlap shared between neighbours inside it (the first chunk of a section starts at its
    heading, not in the section before)."""
    text = page.text
    edges = [0, *section_starts(page, chunk_size), len(text)]
    spans: list[Span] = []
    for start, end in pairwise(edges):
        cores = split_cores(text, start, end, chunk_size - chunk_overlap, separators)
        spans.extend(add_overlap(text, cores, chunk_overlap))
    return spans


def _unique_id(
    seen: Counter[tuple[int, str]],
    tenant_id: str,
    document_id: str,
    page: int,
    text: str,
    section: str,
) -> str:
    seen[(page, text)] += 1
    occurrence = seen[(page, text)]
    hashed = text if occurrence == 1 else f"{text}\x00#{occurrence}"
    if section:
        hashed = f"{hashed}\x00section\x00{section}"
    return chunk_id(tenant_id, document_id, page, hashed)


def _has_words(text: str) -> bool:
    """Whether a piece holds a letter or a digit (of any script)."""
    return any(character.isalnum() for character in text)


def chunk_pages(
    pages: Sequence[Page],
    *,
    tenant_id: str,
    document_id: str,
    source: str,
    chunk_size: int,
    chunk_overlap: int,
    section_paths: bool = False,
    section_chunks: bool = False,
) -> list[Chunk]:
    """Split pages into chunks that never span pages, numbered 0.. across the document.

    Text and code chunks satisfy `chunk.text == page.text[chunk.start:chunk.end]` and
    `len(chunk.text) <= chunk_size`; neighbours on a page share `chunk_overlap` characters
    (minus at most `overlap_tolerance(chunk_overlap)` to start on a word). Table chunks are
    `header + "\\n" + page.text[start:end]` (whole rows, no overlap), labelled with their rows;
    they exceed chunk_size only when the header takes more than 3/4 of it. With
    `section_paths`, a chunk under headings carries their path in `metadata["section"]`; with
    `section_chunks`, no text or code chunk runs past the start of a section (bare headings
    aside).
    """
    if chunk_overlap >= chunk_size:
        raise ValueError("chunk_overlap must be smaller than chunk_size")
    chunks: list[Chunk] = []
    seen: Counter[tuple[int, str]] = Counter()
    sections = SectionPaths()
    for page in pages:
        regions = sections.enter(page)
        if page.kind == "table":
            pieces = [
                (span, f"{page.header}\n{page.text[span.start : span.end]}", label)
                for span, label in _table_spans(page, chunk_size)
            ]
        else:
            separators = separators_for(page.language)
            label = normalise_label(page.label) or str(page.number)
            if section_chunks and page.headings:
                spans = _sectioned_spans(page, chunk_size, chunk_overlap, separators)
            else:
                spans = split_text(page.text, chunk_size, chunk_overlap, separators)
            pieces = [(span, page.text[span.start : span.end], label) for span in spans]
        for span, text, label in pieces:
            if not _has_words(text):  # white space or brackets only: nothing to find it by
                continue
            metadata: dict[str, str | int] = {"kind": page.kind}
            if page.language:
                metadata["language"] = page.language
            if page.ocr is not None:
                metadata[TEXT_SOURCE_KEY] = "ocr"
                metadata[OCR_CONFIDENCE_KEY] = round(page.ocr.confidence)
            section = path_for_span(regions, span.start, span.end) if section_paths else ""
            if section:
                metadata[SECTION_KEY] = section
            chunks.append(
                Chunk(
                    id=_unique_id(seen, tenant_id, document_id, page.number, text, section),
                    tenant_id=tenant_id,
                    document_id=document_id,
                    source=source,
                    page=page.number,
                    page_label=label,
                    chunk_index=len(chunks),
                    start=span.start,
                    end=span.end,
                    text=text,
                    metadata=metadata,
                    page_role=page.role,
                )
            )
    return chunks
