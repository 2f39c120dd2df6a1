"""Citation markers: parsing, bounds, streaming splits, refusal detection, mapping to chunks."""

from __future__ import annotations

import itertools

import pytest
from generation_builders import PARIS, make_hits
from hypothesis import given
from hypothesis import strategies as st

from app.generation.citations import (
    MARKER_GROUP,
    MarkerFilter,
    citations_for,
    is_refusal,
    marker_numbers,
)

pytestmark = pytest.mark.unit

REFUSAL = "I could not find the answer in the provided documents."


@pytest.mark.parametrize(
    ("raw", "shown", "cited"),
    [
        ("Built in 1889 [1].", "Built in 1889 [1].", [1]),
        ("Tall [1][3].", "Tall [1][2].", [1, 3]),
        ("Tall [1, 3].", "Tall [1][2].", [1, 3]),
        ("Tall [3,1] and old [1].", "Tall [1][2] and old [2].", [3, 1]),
        ("Arabic digits [١، ٣].", "Arabic digits [1][2].", [1, 3]),
        ("Invented [7].", "Invented.", []),
        ("Zero [0] is not a passage.", "Zero is not a passage.", []),
        ("Mixed [1, 7].", "Mixed [1].", [1]),
        ("Repeated [2, 2].", "Repeated [1].", [2]),
        ("[9] Leading invented marker.", "Leading invented marker.", []),
        ("Not markers: [note], x[i], [a1], [].", "Not markers: [note], x[i], [a1], [].", []),
        ("Unterminated at the end [2", "Unterminated at the end [2", []),
    ],
)
def test_markers_are_kept_in_range_and_invalid_ones_removed(
    raw: str, shown: str, cited: list[int]
) -> None:
    assert clean_markers(raw, passage_count=3) == (shown, cited)


def clean_markers(text: str, passage_count: int) -> tuple[str, list[int]]:
    """Text with only valid markers, renumbered as sources in order of first use, and the cited
    passage numbers in that order."""
    marker_filter = MarkerFilter(passage_count)
    cleaned = marker_filter.feed(text) + marker_filter.finish()
    return cleaned, marker_filter.cited


def test_dropped_marker_numbers_are_counted() -> None:
    marker_filter = MarkerFilter(2)
    marker_filter.feed("One [1][5], two [2, 9, 10].")
    marker_filter.finish()
    assert marker_filter.dropped == 3
    assert marker_filter.cited == [1, 2]


def test_marker_split_across_deltas_is_shown_only_when_valid() -> None:
    marker_filter = MarkerFilter(3)
    pieces = [marker_filter.feed(piece) for piece in ["Built in 1889 [", "1", "", "2", "]", "."]]
    pieces.append(marker_filter.finish())
    # "[12]" is out of range: no piece may show "[1" even though it was a valid prefix.
    assert "[" not in "".join(pieces)
    assert "".join(pieces) == "Built in 1889."


deltas_text = st.text(alphabet=st.sampled_from(list("ab 1239[],،.٣\n")), max_size=60)


@given(text=deltas_text, cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=8))
def test_streaming_any_split_gives_the_same_text_as_whole(text: str, cuts: list[int]) -> None:
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    marker_filter = MarkerFilter(3)
    streamed = "".join(marker_filter.feed(text[a:b]) for a, b in itertools.pairwise(bounds))
    streamed += marker_filter.finish()
    whole, cited = clean_markers(text, 3)
    assert streamed == whole
    assert marker_filter.cited == cited


@given(text=deltas_text)
def test_shown_sources_are_numbered_in_order_of_first_citation(text: str) -> None:
    # Whichever passages the model cites, the reader meets [1] first, then [2], and so on.
    shown, cited = clean_markers(text, 3)
    numbers = [n for m in MARKER_GROUP.finditer(shown) for n in marker_numbers(m.group(1))]
    assert list(dict.fromkeys(numbers)) == list(range(1, len(cited) + 1))


@given(text=deltas_text)
def test_no_shown_marker_is_out_of_range(text: str) -> None:
    shown, cited = clean_markers(text, 3)
    for match in MARKER_GROUP.finditer(shown):
        assert all(1 <= n <= 3 for n in marker_numbers(match.group(1)))
    assert all(1 <= n <= 3 for n in cited)


@pytest.mark.parametrize(
    "text",
    [
        REFUSAL,
        "i could not find the answer in the provided documents",
        "  I could not find the answer in the provided documents. [1]",
        "I could not find the answer in the provided documents!",
    ],
)
def test_refusal_is_recognised_despite_case_punctuation_and_markers(text: str) -> None:
    assert is_refusal(text, REFUSAL)


@pytest.mark.parametrize(
    "text",
    [
        "I could not find the answer in the provided documents, but it was 1889 [1].",
        "The tower was completed in 1889 [1].",
        "",
    ],
)
def test_an_answer_with_content_is_not_a_refusal(text: str) -> None:
    assert not is_refusal(text, REFUSAL)


def test_citations_point_at_the_cited_chunks_page_and_label() -> None:
    hits = make_hits(PARIS)
    answer = "The Louvre is the most visited [1]. The tower is 330 metres tall [2]."
    citations = citations_for([2, 1], hits, answer)  # passages 2 then 1, shown as [1] and [2]
    assert [c.marker for c in citations] == [1, 2]
    louvre, eiffel = citations
    assert (louvre.source, louvre.page, louvre.page_label) == ("museums.txt", 1, "1")
    assert louvre.document_id == hits[1].chunk.document_id
    assert (eiffel.source, eiffel.page, eiffel.page_label) == ("eiffel.pdf", 4, "iv")
    # The snippet is the cited chunk's sentence that supports the answer, not its first one.
    assert eiffel.snippet.startswith("It is 330 metres tall")
    assert eiffel.snippet in hits[0].chunk.text


def test_long_snippets_are_shortened_at_a_word() -> None:
    long_text = "word " * 200
    hits = make_hits([("long.txt", 1, "1", long_text)])
    (citation,) = citations_for([1], hits, "word [1]")
    assert len(citation.snippet) <= 202
    assert citation.snippet.endswith(" …")
