"""Passages cut to the question's best sentences: what the model reads, and what stays citable."""

from __future__ import annotations

import pytest
from generation_builders import PARIS, PassageSpec, make_hits, relevant

from app.generation.focus import focus_passages
from app.generation.grounded_answer import final_answer, shown_passages, stream_answer
from app.generation.prompt import PASSAGES_OPEN
from tests.fakes import FakeLLM

pytestmark = pytest.mark.unit

REFUSAL = "I could not find the answer in the provided documents."

# The question's words are in the third sentence; its answer (the magazine's name) is in the
# second, as in "Each year, ENR compiles ..." after "Engineering News-Record (ENR) is ...".
CONSTRUCTION: list[PassageSpec] = [
    (
        "industry.pdf",
        12,
        "12",
        "Construction is the process of building infrastructure. "
        "Engineering News-Record (ENR) is a trade magazine for the construction industry. "
        "Each year, ENR compiles and reports on data about the size of design and construction "
        "companies. "
        "Large projects are often run by a general contractor. "
        "Safety rules differ from one country to another. "
        "Many workers are hired per project rather than permanently.",
    ),
    (
        "weather.txt",
        1,
        "1",
        "Rain delays are the most common cause of schedule overruns on outdoor sites. "
        "Winter concrete needs heated enclosures.",
    ),
    ("museums.txt", 3, "3", "The Louvre is the most-visited museum in the world."),
]
QUESTION = "What compiles and reports on data about the size of design and construction companies?"


def test_the_matching_sentence_keeps_its_neighbours_and_the_rest_is_elided() -> None:
    hits = make_hits(CONSTRUCTION)
    focused = focus_passages(QUESTION, hits, max_chars=250, rule="ranked")
    top = focused[0].chunk.text
    assert "Engineering News-Record (ENR) is a trade magazine" in top  # the answer, one before
    assert "Each year, ENR compiles" in top
    assert "Large projects are often run" in top  # the one after
    assert "Safety rules" not in top and "Many workers" not in top
    assert top.startswith("… ")  # the opening sentence was left out
    assert sum(len(hit.chunk.text) for hit in focused) <= 250


def test_passages_with_nothing_chosen_are_not_shown_and_citations_keep_their_pages() -> None:
    hits = make_hits(CONSTRUCTION)
    focused = focus_passages(QUESTION, hits, max_chars=250, rule="ranked")
    assert [hit.chunk.source for hit in focused] == ["industry.pdf"]
    assert focused[0].chunk.id == hits[0].chunk.id
    assert (focused[0].chunk.page, focused[0].chunk.page_label) == (12, "12")
    # the marker the model writes points at what it read, and resolves to the real page
    llm = FakeLLM("Engineering News-Record (ENR) compiles it [1].")
    answer = final_answer(
        stream_answer(
            QUESTION,
            relevant(CONSTRUCTION),
            llm,
            refusal_text=REFUSAL,
            focus_chars=250,
            focus_rule="ranked",
        )
    )
    assert [(c.source, c.page_label) for c in answer.citations] == [("industry.pdf", "12")]
    prompt = llm.requests[0].messages[-1].content
    assert "Each year, ENR compiles" in prompt
    assert "Rain delays" not in prompt and "Louvre" not in prompt
    assert prompt.count('<passage n="') == 1


def test_the_best_sentence_is_kept_even_when_longer_than_the_budget() -> None:
    focused = focus_passages(QUESTION, make_hits(CONSTRUCTION), max_chars=10, rule="ranked")
    assert [hit.chunk.text for hit in focused] == [
        "… Each year, ENR compiles and reports on data about the size of design and "
        "construction companies."
    ]


def test_no_shared_term_keeps_the_top_passages_opening_sentences() -> None:
    # An Arabic question over English passages shares no term: reading order fills the budget.
    question = "متى اكتمل بناء برج إيفل؟"
    focused = focus_passages(question, make_hits(PARIS), max_chars=60, rule="ranked")
    assert [hit.chunk.text for hit in focused] == ["The Eiffel Tower was completed in 1889."]


def test_focus_off_shows_whole_passages() -> None:
    hits = make_hits(CONSTRUCTION)
    shown = shown_passages(QUESTION, hits, max_passages=3, focus_chars=0)
    assert [hit.chunk.text for hit in shown] == [hit.chunk.text for hit in hits]
    llm = FakeLLM("ENR [1].")
    final_answer(stream_answer(QUESTION, relevant(CONSTRUCTION), llm, refusal_text=REFUSAL))
    prompt = llm.requests[0].messages[-1].content
    assert PASSAGES_OPEN in prompt and "Many workers are hired" in prompt
