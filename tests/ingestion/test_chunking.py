"""Chunking: delivered overlap, coverage, offsets, stable and distinct ids, code and JSON."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ingestion_builders import ninety_five_char_lines, pdf_from_pages
from langchain_text_splitters import RecursiveCharacterTextSplitter

from app.domain import Chunk, Page, chunk_id
from app.ingestion import LoadLimits, chunk_pages, load
from app.ingestion.splitter import overlap_tolerance

pytestmark = pytest.mark.unit


def chunk(pages: list[Page], size: int, overlap: int) -> list[Chunk]:
    return chunk_pages(
        pages,
        tenant_id="t1",
        document_id="doc1",
        source="f",
        chunk_size=size,
        chunk_overlap=overlap,
    )


def neighbour_overlaps(chunks: list[Chunk]) -> list[int]:
    return [
        prev.end - cur.start for prev, cur in itertools.pairwise(chunks) if prev.page == cur.page
    ]


def langchain_overlaps(text: str, size: int, overlap: int) -> list[int]:
    """Characters actually shared by LangChain neighbours (longest suffix == prefix)."""
    splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap)
    parts = splitter.split_text(text)
    shared = []
    for a, b in itertools.pairwise(parts):
        shared.append(
            max((n for n in range(min(len(a), len(b)) + 1) if a.endswith(b[:n])), default=0)
        )
    return shared


@pytest.fixture(scope="module")
def pdf_pages(tmp_path_factory: pytest.TempPathFactory) -> list[Page]:
    """Three pages of ~95-character lines, extracted from a real PDF."""
    path = tmp_path_factory.mktemp("pdf") / "lines.pdf"
    pdf_from_pages(path, [ninety_five_char_lines(45, seed=page) for page in range(3)])
    return load(path, LoadLimits())


@pytest.mark.parametrize(("size", "overlap"), [(1000, 150), (1000, 50), (500, 100), (800, 0)])
def test_configured_overlap_is_delivered_on_a_pdf_with_95_char_lines(
    pdf_pages: list[Page], size: int, overlap: int
) -> None:
    lines = pdf_pages[0].text.splitlines()
    assert 88 <= statistics.mean(len(line) for line in lines) <= 100
    chunks = chunk(pdf_pages, size, overlap)
    measured = neighbour_overlaps(chunks)
    baseline = [n for page in pdf_pages for n in langchain_overlaps(page.text, size, overlap)]
    print(
        f"\nsize={size} overlap={overlap}: ours min/mean/max = {min(measured)}/"
        f"{statistics.mean(measured):.1f}/{max(measured)} over {len(measured)} pairs; "
        f"LangChain = {sorted(set(baseline))}"
    )
    assert len(measured) >= 6
    tolerance = overlap_tolerance(overlap)
    assert all(overlap - tolerance <= n <= overlap for n in measured), measured
    for prev, cur in itertools.pairwise(chunks):
        if prev.page == cur.page:  # the shared characters really are the same text
            assert prev.text.endswith(cur.text[: prev.end - cur.start])
    assert all(len(c.text) <= size for c in chunks)


def test_chunks_never_span_pages_and_index_counts_across_the_document(
    pdf_pages: list[Page],
) -> None:
    chunks = chunk(pdf_pages, 1000, 150)
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    assert {c.page for c in chunks} == {1, 2, 3}
    by_number = {p.number: p for p in pdf_pages}
    for c in chunks:
        assert by_number[c.page].text[c.start : c.end] == c.text
        assert (c.tenant_id, c.document_id, c.source, c.page_label) == (
            "t1",
            "doc1",
            "f",
            str(c.page),
        )


prose = st.text(
    alphabet=st.sampled_from(list("abcdefghij klmnop.?!\n\n  ,-عربيةالنص")),
    min_size=0,
    max_size=3000,
)


@settings(max_examples=150, deadline=None)
@given(text=prose, size=st.integers(20, 600), ratio=st.floats(0, 0.6))
def test_chunks_cover_the_page_and_match_their_offsets(text: str, size: int, ratio: float) -> None:
    overlap = int(size * ratio)
    page = Page(number=2, label="ii", text=text)
    chunks = chunk([page], size, overlap)
    covered = [False] * len(text)
    for c in chunks:
        assert c.text == text[c.start : c.end]
        assert 0 < len(c.text) <= size
        covered[c.start : c.end] = [True] * (c.end - c.start)
    # Every letter and digit is in a chunk (a piece of only spaces and punctuation is not).
    missing = [i for i, ok in enumerate(covered) if not ok and text[i].isalnum()]
    assert missing == []
    assert all(any(ch.isalnum() for ch in c.text) for c in chunks)
    assert [c.start for c in chunks] == sorted(c.start for c in chunks)


@settings(max_examples=100, deadline=None)
@given(
    words=st.lists(st.text("abcdefgh", min_size=1, max_size=9), min_size=50, max_size=400),
    size=st.integers(120, 500),
    ratio=st.floats(0.05, 0.5),
)
def test_overlap_is_within_tolerance_for_any_prose(
    words: list[str], size: int, ratio: float
) -> None:
    overlap = int(size * ratio)
    text = " ".join(words)
    chunks = chunk([Page(number=1, label="1", text=text)], size, overlap)
    for n in neighbour_overlaps(chunks):
        assert overlap - overlap_tolerance(overlap) <= n <= overlap


def test_identical_texts_on_one_page_get_distinct_stable_ids() -> None:
    paragraph = "Confidential. Do not distribute this document outside the company."
    page = Page(number=1, label="1", text="\n\n".join([paragraph] * 3))
    first = chunk([page], 80, 0)
    assert [c.text.strip() for c in first] == [paragraph] * 3
    assert len({c.id for c in first}) == 3
    assert [c.id for c in chunk([page], 80, 0)] == [c.id for c in first]  # re-ingest: same ids
    # The first occurrence is the plain content hash of the spec.
    assert first[0].id == chunk_id("t1", "doc1", 1, first[0].text)


def test_same_text_on_another_page_or_tenant_gets_another_id() -> None:
    pages = [Page(number=n, label=str(n), text="Same words.") for n in (1, 2)]
    ids = {c.id for c in chunk(pages, 100, 0)}
    other = chunk_pages(
        pages[:1], tenant_id="t2", document_id="doc1", source="f", chunk_size=100, chunk_overlap=0
    )
    assert len(ids) == 2 and other[0].id not in ids


PYTHON = '''import os


class Store:
    """A store."""

    def get(self, key):
        return self.data[key]

    def put(self, key, value):
        self.data[key] = value


@cached
def helper(x):
    return x * 2


def main():
    print(helper(2))
'''


def test_python_code_splits_at_definitions(tmp_path: Path, limits: LoadLimits) -> None:
    path = tmp_path / "store.py"
    path.write_text(PYTHON)
    pages = load(path, limits)
    assert (pages[0].kind, pages[0].language) == ("code", "python")
    chunks = chunk(pages, 120, 0)
    starts = [c.text.lstrip().split("\n", 1)[0] for c in chunks]
    # Every chunk begins at a definition (a method, a decorated function), never mid-body.
    assert starts[1:] and all(s.startswith(("class ", "def ", "@")) for s in starts[1:]), starts
    assert "class Store:" in starts and "@cached" in starts
    assert all(c.text == pages[0].text[c.start : c.end] for c in chunks)


def test_json_is_split_between_members(tmp_path: Path, limits: LoadLimits) -> None:
    data = {
        f"service_{n}": {"port": 8000 + n, "owner": f"team {n}", "tags": ["a", "b"]}
        for n in range(8)
    }
    path = tmp_path / "services.json"
    path.write_text(json.dumps(data, separators=(",", ":")))
    pages = load(path, limits)
    assert pages[0].text == json.dumps(data, indent=2)
    chunks = chunk(pages, 260, 0)
    assert len(chunks) > 2
    # Each chunk starts at a member of the top-level object: readable, nearly valid JSON.
    for c in chunks[1:]:
        assert c.text.startswith('  "service_'), c.text[:30]


def test_a_piece_of_only_brackets_is_no_chunk(tmp_path: Path, limits: LoadLimits) -> None:
    # Nested JSON cut at its members leaves pieces such as "}\n  ]\n": nothing in them to find,
    # yet the keyword arm ranked them first for a nonsense question.
    data = {"data": [{"paragraphs": [{"context": f"paragraph {n} " * 20} for n in range(6)]}]}
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(data))
    chunks = chunk(load(path, limits), 120, 0)
    assert chunks and all(any(ch.isalnum() for ch in c.text) for c in chunks), [
        c.text for c in chunks if not any(ch.isalnum() for ch in c.text)
    ]
    assert all(any(f"paragraph {n} " in c.text for c in chunks) for n in range(6))


def test_invalid_json_is_indexed_as_written(tmp_path: Path, limits: LoadLimits) -> None:
    path = tmp_path / "tsconfig.json"
    path.write_text('{\n  // comments are not JSON\n  "strict": true,\n}\n')
    assert "// comments are not JSON" in load(path, limits)[0].text


def test_markdown_splits_at_headings(tmp_path: Path, limits: LoadLimits) -> None:
    sections = [f"## Section {n}\n\n" + "Body sentence of this section. " * 4 for n in range(1, 6)]
    path = tmp_path / "guide.md"
    path.write_text("# Guide\n\n" + "\n\n".join(sections))
    pages = load(path, limits)
    text = pages[0].text
    for overlap in (0, 30):
        chunks = chunk(pages, 260, overlap)
        # The new part of every chunk (after the overlap it shares) opens at a heading.
        opened = [text[prev.end :].split("\n", 1)[0] for prev in chunks[:-1]]
        assert opened == [f"## Section {n}" for n in range(2, 6)], (overlap, opened)
