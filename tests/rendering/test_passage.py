"""Locating a chunk's passage in PDFium's text of the same page (other extractor, other spacing)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.rendering.passage import keyed, locate

pytestmark = pytest.mark.unit

PAGE = (
    "Safety first.\r\nThe mast bolts are tight-\r\nened to 45 Nm. Check them after\r\n"
    "each storm. The mast bolts are tightened to 45 Nm. Check them after each storm."
)


def _span_text(page: str, passage: str, hint: float = 0.0) -> str:
    span = locate(keyed(page), passage, hint)
    assert span is not None
    return page[span[0] : span[1] + 1]


def test_whitespace_line_breaks_and_hyphenation_do_not_hide_a_passage() -> None:
    found = _span_text(PAGE, "The mast bolts are tightened to 45 Nm.")
    assert found.startswith("The mast bolts") and found.endswith("45 Nm")
    assert "\r\n" in found  # the first occurrence, broken over lines


def test_the_position_hint_picks_the_repeated_occurrence_the_chunk_came_from() -> None:
    first = locate(keyed(PAGE), "The mast bolts are tightened to 45 Nm.", 0.0)
    second = locate(keyed(PAGE), "The mast bolts are tightened to 45 Nm.", 0.9)
    assert first is not None and second is not None
    assert second[0] > first[1]


def test_a_passage_differing_in_the_middle_is_found_by_its_ends() -> None:
    passage = (
        "Safety first. The mast bolts are tightened to FORTY-FIVE Nm. Check them after each storm."
    )
    found = _span_text(PAGE, passage)
    assert found.startswith("Safety first") and found.rstrip(".").endswith("storm")


def test_ligatures_and_case_are_folded() -> None:
    assert _span_text("The \ufb01nal CHECK list", "final check") == "\ufb01nal CHECK"


def test_arabic_text_is_found() -> None:
    page = "مقدمة\nيجب شد مسامير الصاري إلى 45 نيوتن متر.\nنهاية"
    assert _span_text(page, "مسامير الصاري إلى 45") == "مسامير الصاري إلى 45"


def test_a_passage_not_on_the_page_is_not_highlighted() -> None:
    assert locate(keyed(PAGE), "Nothing like this sentence is printed anywhere here.") is None
    assert locate(keyed(PAGE), "") is None
    assert locate(keyed(""), "anything") is None


@given(
    st.lists(st.text(alphabet="abcdefgh ", min_size=1, max_size=12), min_size=1, max_size=8),
    st.data(),
)
def test_any_slice_of_the_page_is_located_and_covers_the_same_letters(
    words: list[str], data: st.DataObject
) -> None:
    page = "\n".join(words)
    start = data.draw(st.integers(0, len(page)))
    end = data.draw(st.integers(start, len(page)))
    passage = page[start:end]
    span = locate(keyed(page), passage, start / max(len(page), 1))
    if not keyed(passage).key:
        assert span is None
        return
    assert span is not None
    assert keyed(page[span[0] : span[1] + 1]).key == keyed(passage).key
